"""A variational autoencoder (reparameterisation, BCE with sum reduction, KL term): written as a PyTorch script is, with
`import chutney as torch`. Run by tests/python/test_pytorch_scripts.py, which
checks the RESULT line it prints last. argv[1]: a directory for its files."""
import sys
import chutney as torch
from chutney import nn, optim
from chutney.nn import functional as F
torch.manual_seed(1)
class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)
    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)
    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5*logvar)
        eps = torch.randn_like(std)
        return mu + eps*std
    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))
    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD
data = torch.rand(128, 1, 28, 28)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data, torch.zeros(128, dtype=torch.long)), batch_size=32, shuffle=True)
epoch_losses = []
for epoch in range(1, 3):
    model.train()
    train_loss = 0
    for batch_idx, (d, _) in enumerate(loader):
        d = d.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(d)
        loss = loss_function(recon_batch, d, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    print('Epoch: {} Average loss: {:.4f}'.format(epoch, train_loss / len(loader.dataset)))
    epoch_losses.append(train_loss / len(loader.dataset))
    model.eval()
    with torch.no_grad():
        sample = torch.randn(64, 20).to(device)
        sample = model.decode(sample).cpu()
        print(sample.view(64, 1, 28, 28).shape)
import json
print('RESULT', json.dumps({'epoch_losses': epoch_losses}))
