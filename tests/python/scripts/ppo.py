"""A PPO update (Categorical and Normal policies, GAE with item assignment, clipped objective, clipping): written as a PyTorch script is, with
`import chutney as torch`. Run by tests/python/test_pytorch_scripts.py, which
checks the RESULT line it prints last. argv[1]: a directory for its files."""
import sys
import copy
import numpy as np
import chutney as torch
import chutney.nn as nn
import chutney.nn.functional as F
from chutney.distributions import Categorical, Normal

class ActorCritic(nn.Module):
    def __init__(self, obs_dim, n_act, cont=False):
        super().__init__()
        self.cont = cont
        self.body = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
        self.pi = nn.Linear(64, n_act)
        self.v = nn.Linear(64, 1)
        self.log_std = nn.Parameter(torch.zeros(n_act))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.orthogonal_(m.weight, gain=np.sqrt(2))
                nn.init.constant_(m.bias, 0.0)
    def dist(self, obs):
        h = self.body(obs)
        if self.cont:
            return Normal(self.pi(h), self.log_std.exp().expand_as(self.pi(h)))
        return Categorical(logits=self.pi(h))
    def value(self, obs):
        return self.v(self.body(obs)).squeeze(-1)

rng = np.random.default_rng(0)
finals = []
for cont in (False, True):
    ac = ActorCritic(4, 2, cont)
    opt = torch.optim.Adam(ac.parameters(), lr=3e-4, eps=1e-5)
    obs = rng.standard_normal((128, 4)).astype(np.float32)
    with torch.no_grad():
        o = torch.as_tensor(obs, dtype=torch.float32)
        d = ac.dist(o)
        act = d.sample()
        logp_old = d.log_prob(act).sum(-1) if cont else d.log_prob(act)
        vals = ac.value(o)
    rews = torch.from_numpy(rng.standard_normal(128).astype(np.float32))
    dones = torch.zeros(128)
    adv = torch.zeros_like(rews); lastgaelam = 0
    for t in reversed(range(127)):
        nonterminal = 1.0 - dones[t + 1]
        delta = rews[t] + 0.99 * vals[t + 1] * nonterminal - vals[t]
        adv[t] = lastgaelam = delta + 0.99 * 0.95 * nonterminal * lastgaelam
    ret = adv + vals
    for epoch in range(3):
        idx = torch.randperm(128)
        for mb in idx.split(32):
            d = ac.dist(o[mb])
            logp = d.log_prob(act[mb]).sum(-1) if cont else d.log_prob(act[mb])
            ratio = (logp - logp_old[mb]).exp()
            a = adv[mb]; a = (a - a.mean()) / (a.std() + 1e-8)
            pg = torch.max(-a * ratio, -a * torch.clamp(ratio, 1 - 0.2, 1 + 0.2)).mean()
            vloss = 0.5 * ((ac.value(o[mb]) - ret[mb]) ** 2).mean()
            ent = d.entropy().mean()
            loss = pg - 0.01 * ent + 0.5 * vloss
            opt.zero_grad(); loss.backward()
            nn.utils.clip_grad_norm_(ac.parameters(), 0.5)
            opt.step()
    approx_kl = ((ratio - 1) - (logp - logp_old[mb])).mean()
    print(cont, round(loss.item(), 4), round(approx_kl.item(), 6))
    finals.append([loss.item(), approx_kl.item()])
import json
print('RESULT', json.dumps({'finals': finals}))
