"""A GRU encoder-decoder with additive attention and teacher forcing (SGD with Nesterov): written as a PyTorch script is, with
`import chutney as torch`. Run by tests/python/test_pytorch_scripts.py, which
checks the RESULT line it prints last. argv[1]: a directory for its files."""
import sys
import random
import chutney as torch
import chutney.nn as nn
import chutney.nn.functional as F
torch.manual_seed(0); random.seed(0)
class Encoder(nn.Module):
    def __init__(self, n, h):
        super().__init__(); self.hidden_size = h
        self.embedding = nn.Embedding(n, h); self.gru = nn.GRU(h, h, batch_first=True)
    def forward(self, x):
        e = self.embedding(x); return self.gru(e)
class AttnDecoder(nn.Module):
    def __init__(self, h, n):
        super().__init__()
        self.embedding = nn.Embedding(n, h)
        self.Wa = nn.Linear(h, h); self.Ua = nn.Linear(h, h); self.Va = nn.Linear(h, 1)
        self.gru = nn.GRU(2 * h, h, batch_first=True); self.out = nn.Linear(h, n)
    def attn(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        return torch.bmm(weights, keys), weights
    def forward(self, enc_out, enc_hidden, target=None, maxlen=6):
        B = enc_out.size(0)
        dec_in = torch.empty(B, 1, dtype=torch.long).fill_(0)
        hidden = enc_hidden; outs = []; attns = []
        for i in range(maxlen):
            emb = self.embedding(dec_in)
            query = hidden.permute(1, 0, 2)
            ctx, w = self.attn(query, enc_out)
            o, hidden = self.gru(torch.cat((emb, ctx), dim=2), hidden)
            o = self.out(o); outs.append(o); attns.append(w)
            if target is not None: dec_in = target[:, i].unsqueeze(1)
            else:
                _, topi = o.topk(1); dec_in = topi.squeeze(-1).detach()
        outs = torch.cat(outs, dim=1)
        return F.log_softmax(outs, dim=-1), hidden, torch.cat(attns, dim=1)
enc, dec = Encoder(20, 32), AttnDecoder(32, 20)
src = torch.randint(1, 20, (8, 7)); tgt = torch.randint(1, 20, (8, 6))
eo = torch.optim.SGD(enc.parameters(), lr=0.1, momentum=0.9, nesterov=True)
do = torch.optim.SGD(dec.parameters(), lr=0.1, momentum=0.9, nesterov=True)
crit = nn.NLLLoss()
losses = []
for it in range(5):
    eo.zero_grad(); do.zero_grad()
    out, hid = enc(src)
    dout, _, _ = dec(out, hid, tgt)
    loss = crit(dout.view(-1, dout.size(-1)), tgt.view(-1))
    loss.backward(); eo.step(); do.step()
    print(it, round(loss.item(), 4))
    losses.append(loss.item())
with torch.no_grad():
    out, hid = enc(src); d, _, a = dec(out, hid)
    print(d.argmax(-1)[0].tolist(), a.shape)
import json
print('RESULT', json.dumps({'losses': losses, 'tokens': d.argmax(-1)[0].tolist()}))
