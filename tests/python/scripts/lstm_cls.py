"""An LSTM text classifier over packed sequences (bidirectional, two layers, AdamW, clipping): written as a PyTorch script is, with
`import chutney as torch`. Run by tests/python/test_pytorch_scripts.py, which
checks the RESULT line it prints last. argv[1]: a directory for its files."""
import sys
import chutney as torch
import chutney.nn as nn
from chutney.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
torch.manual_seed(0)
class Classifier(nn.Module):
    def __init__(self, vocab, emb, hid, ncls):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb, padding_idx=0)
        self.lstm = nn.LSTM(emb, hid, num_layers=2, batch_first=True, bidirectional=True, dropout=0.1)
        self.fc = nn.Linear(hid * 2, ncls)
        self.dropout = nn.Dropout(0.2)
    def forward(self, text, lengths):
        embedded = self.dropout(self.embedding(text))
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_out, (hidden, cell) = self.lstm(packed)
        out, out_lens = pad_packed_sequence(packed_out, batch_first=True)
        hidden = self.dropout(torch.cat((hidden[-2,:,:], hidden[-1,:,:]), dim=1))
        return self.fc(hidden)
seqs = [torch.randint(1, 50, (int(n),)) for n in torch.randint(3, 12, (20,))]
lengths = torch.tensor([len(s) for s in seqs])
padded = pad_sequence(seqs, batch_first=True)
labels = torch.randint(0, 3, (20,))
model = Classifier(50, 16, 24, 3)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
crit = nn.CrossEntropyLoss()
print(sum(p.numel() for p in model.parameters() if p.requires_grad))
losses = []
for epoch in range(5):
    model.train()
    opt.zero_grad()
    logits = model(padded, lengths)
    loss = crit(logits, labels)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    opt.step()
    losses.append(loss.item())
    acc = (logits.argmax(1) == labels).float().mean()
    print(f"epoch {epoch} loss {loss.item():.4f} acc {acc.item():.3f}")
model.eval()
with torch.inference_mode():
    preds = torch.softmax(model(padded, lengths), dim=-1)
    print(preds.sum(dim=1)[:3], preds.max(dim=1)[1][:5])
import json
print('RESULT', json.dumps({'losses': losses, 'prob_sums': preds.sum(dim=1).tolist()}))
