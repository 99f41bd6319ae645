"""A DCGAN (ConvTranspose2d, BatchNorm, BCELoss, Adam with betas, a checkpoint round trip): written as a PyTorch script is, with
`import chutney as torch`. Run by tests/python/test_pytorch_scripts.py, which
checks the RESULT line it prints last. argv[1]: a directory for its files."""
import sys
import chutney as torch
import chutney.nn as nn
import chutney.nn.functional as F
from collections import OrderedDict
torch.manual_seed(0)
nz = 16
class G(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(OrderedDict([
            ('ct1', nn.ConvTranspose2d(nz, 32, 4, 1, 0, bias=False)),
            ('bn1', nn.BatchNorm2d(32)), ('r1', nn.ReLU(True)),
            ('ct2', nn.ConvTranspose2d(32, 16, 4, 2, 1, bias=False)),
            ('bn2', nn.BatchNorm2d(16)), ('r2', nn.ReLU(True)),
            ('ct3', nn.ConvTranspose2d(16, 1, 4, 2, 1, bias=False)),
            ('tanh', nn.Tanh())]))
    def forward(self, x): return self.main(x)
class D(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, 16, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(16, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(32, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    def forward(self, x): return self.main(x).view(-1, 1).squeeze(1)
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)
netG, netD = G(), D()
netG.apply(weights_init); netD.apply(weights_init)
criterion = nn.BCELoss()
fixed_noise = torch.randn(8, nz, 1, 1)
real_label, fake_label = 1., 0.
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
data = torch.rand(64, 1, 16, 16) * 2 - 1
ds = torch.utils.data.TensorDataset(data)
dl = torch.utils.data.DataLoader(ds, batch_size=16, shuffle=True, drop_last=True)
for epoch in range(2):
    for i, (real,) in enumerate(dl, 0):
        netD.zero_grad()
        b_size = real.size(0)
        label = torch.full((b_size,), real_label, dtype=torch.float)
        output = netD(real).view(-1)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        noise = torch.randn(b_size, nz, 1, 1)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach()).view(-1)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        errD = errD_real + errD_fake
        optD.step()
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake).view(-1)
        errG = criterion(output, label)
        errG.backward()
        optG.step()
        print('[%d][%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f' % (epoch, i, errD.item(), errG.item(), D_x))
with torch.no_grad():
    fake = netG(fixed_noise).detach().cpu()
print(fake.shape, fake.min().item() >= -1)
losses = [errD.item(), errG.item()]
torch.save({'G': netG.state_dict(), 'D': netD.state_dict(), 'optG': optG.state_dict()}, sys.argv[1] + '/gan.pt')
ck = torch.load(sys.argv[1] + '/gan.pt')
netG.load_state_dict(ck['G']); optG.load_state_dict(ck['optG'])
print("ok")
import json
print('RESULT', json.dumps({'losses': losses, 'fake_range': [fake.min().item(), fake.max().item()]}))
