"""A small DDPM (schedules with cumprod and pad, gather-based extract, time embeddings, GroupNorm/SiLU U-Net, sampling under no_grad): written as a PyTorch script is, with
`import chutney as torch`. Run by tests/python/test_pytorch_scripts.py, which
checks the RESULT line it prints last. argv[1]: a directory for its files."""
import sys
import math
import chutney as torch
import chutney.nn as nn
import chutney.nn.functional as F

def linear_beta_schedule(timesteps):
    return torch.linspace(1e-4, 0.02, timesteps)
T = 50
betas = linear_beta_schedule(T)
alphas = 1. - betas
alphas_cumprod = torch.cumprod(alphas, dim=0)
alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
sqrt_recip_alphas = torch.sqrt(1.0 / alphas)
sqrt_alphas_cumprod = torch.sqrt(alphas_cumprod)
sqrt_one_minus_alphas_cumprod = torch.sqrt(1. - alphas_cumprod)
posterior_variance = betas * (1. - alphas_cumprod_prev) / (1. - alphas_cumprod)

def extract(a, t, x_shape):
    batch_size = t.shape[0]
    out = a.gather(-1, t.cpu())
    return out.reshape(batch_size, *((1,) * (len(x_shape) - 1))).to(t.device)

def q_sample(x_start, t, noise=None):
    if noise is None:
        noise = torch.randn_like(x_start)
    return extract(sqrt_alphas_cumprod, t, x_start.shape) * x_start + extract(sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise

class SinusoidalPositionEmbeddings(nn.Module):
    def __init__(self, dim):
        super().__init__(); self.dim = dim
    def forward(self, time):
        device = time.device
        half_dim = self.dim // 2
        embeddings = math.log(10000) / (half_dim - 1)
        embeddings = torch.exp(torch.arange(half_dim, device=device) * -embeddings)
        embeddings = time[:, None] * embeddings[None, :]
        return torch.cat((embeddings.sin(), embeddings.cos()), dim=-1)

class Block(nn.Module):
    def __init__(self, dim, dim_out, groups=4):
        super().__init__()
        self.proj = nn.Conv2d(dim, dim_out, 3, padding=1)
        self.norm = nn.GroupNorm(groups, dim_out)
        self.act = nn.SiLU()
    def forward(self, x, scale_shift=None):
        x = self.norm(self.proj(x))
        if scale_shift is not None:
            scale, shift = scale_shift
            x = x * (scale + 1) + shift
        return self.act(x)

class ResnetBlock(nn.Module):
    def __init__(self, dim, dim_out, time_emb_dim=None, groups=4):
        super().__init__()
        self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out * 2)) if time_emb_dim else None
        self.block1 = Block(dim, dim_out, groups=groups)
        self.block2 = Block(dim_out, dim_out, groups=groups)
        self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()
    def forward(self, x, time_emb=None):
        scale_shift = None
        if self.mlp is not None and time_emb is not None:
            time_emb = self.mlp(time_emb)
            time_emb = time_emb[:, :, None, None]  # rearrange "b c -> b c 1 1"
            scale_shift = time_emb.chunk(2, dim=1)
        h = self.block1(x, scale_shift=scale_shift)
        h = self.block2(h)
        return h + self.res_conv(x)

class TinyUnet(nn.Module):
    def __init__(self, dim=8, channels=1):
        super().__init__()
        self.init_conv = nn.Conv2d(channels, dim, 1)
        tdim = dim * 4
        self.time_mlp = nn.Sequential(SinusoidalPositionEmbeddings(dim), nn.Linear(dim, tdim), nn.GELU(), nn.Linear(tdim, tdim))
        self.down = ResnetBlock(dim, dim * 2, time_emb_dim=tdim)
        self.downsample = nn.Conv2d(dim * 2, dim * 2, 4, 2, 1)
        self.mid = ResnetBlock(dim * 2, dim * 2, time_emb_dim=tdim)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.up_block = ResnetBlock(dim * 4, dim, time_emb_dim=tdim)
        self.final = nn.Conv2d(dim, channels, 1)
    def forward(self, x, time):
        x = self.init_conv(x)
        t = self.time_mlp(time)
        h = self.down(x, t)
        x2 = self.mid(self.downsample(h), t)
        x2 = self.up(x2)
        x2 = torch.cat((x2, h), dim=1)
        return self.final(self.up_block(x2, t))

model = TinyUnet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.rand(16, 1, 8, 8) * 2 - 1
losses = []
for step in range(5):
    optimizer.zero_grad()
    t = torch.randint(0, T, (16,), device='cpu').long()
    noise = torch.randn_like(data)
    x_noisy = q_sample(data, t, noise)
    predicted_noise = model(x_noisy, t)
    loss = F.smooth_l1_loss(noise, predicted_noise)
    loss.backward()
    optimizer.step()
    print(step, round(loss.item(), 4))
    losses.append(loss.item())

@torch.no_grad()
def p_sample(model, x, t, t_index):
    betas_t = extract(betas, t, x.shape)
    sqrt_one_minus_alphas_cumprod_t = extract(sqrt_one_minus_alphas_cumprod, t, x.shape)
    sqrt_recip_alphas_t = extract(sqrt_recip_alphas, t, x.shape)
    model_mean = sqrt_recip_alphas_t * (x - betas_t * model(x, t) / sqrt_one_minus_alphas_cumprod_t)
    if t_index == 0:
        return model_mean
    posterior_variance_t = extract(posterior_variance, t, x.shape)
    noise = torch.randn_like(x)
    return model_mean + torch.sqrt(posterior_variance_t) * noise

img = torch.randn((2, 1, 8, 8))
for i in reversed(range(0, T)):
    img = p_sample(model, img, torch.full((2,), i, dtype=torch.long), i)
print(img.shape, img.abs().max().item() < 100, img.cpu().numpy().dtype)
import json
print('RESULT', json.dumps({'losses': losses, 'sample_max': img.abs().max().item()}))
