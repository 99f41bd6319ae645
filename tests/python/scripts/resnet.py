"""A torchvision-style ResNet loop (Dataset of NumPy dicts, out += identity, kaiming init, topk accuracy, cosine schedule, ONNX export at opset 13): written as a PyTorch script is, with
`import chutney as torch`. Run by tests/python/test_pytorch_scripts.py, which
checks the RESULT line it prints last. argv[1]: a directory for its files."""
import sys
import time, os
import numpy as np
import chutney as torch
import chutney.nn as nn
import chutney.nn.functional as F
from chutney.utils.data import Dataset, DataLoader

class NumpyDS(Dataset):
    def __init__(self, n=96):
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((n, 3, 16, 16)).astype(np.float32)
        self.y = rng.integers(0, 10, n)
    def __len__(self): return len(self.x)
    def __getitem__(self, i):
        return {'image': self.x[i], 'label': int(self.y[i]), 'meta': 'x%d' % i}

class BasicBlock(nn.Module):
    expansion = 1
    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)

class ResNet(nn.Module):
    def __init__(self, layers=(1, 1), num_classes=10):
        super().__init__()
        self.inplanes = 16
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(16, layers[0])
        self.layer2 = self._make_layer(32, layers[1], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32 * BasicBlock.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        for m in self.modules():
            if isinstance(m, BasicBlock):
                nn.init.constant_(m.bn2.weight, 0)
    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        for _ in range(1, blocks):
            layers.append(BasicBlock(self.inplanes, planes))
        return nn.Sequential(*layers)
    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)

class AverageMeter:
    def __init__(self): self.reset()
    def reset(self): self.val = self.avg = self.sum = self.count = 0
    def update(self, val, n=1):
        self.val = val; self.sum += val * n; self.count += n; self.avg = self.sum / self.count

def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res

device = torch.device('cpu')
torch.backends.cudnn.benchmark = True
model = ResNet().to(device)
print(model.fc)
criterion = nn.CrossEntropyLoss().to(device)
optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=3)
loader = DataLoader(NumpyDS(), batch_size=32, shuffle=True, num_workers=2, pin_memory=True)
for epoch in range(3):
    top1, losses = AverageMeter(), AverageMeter()
    model.train()
    end = time.time()
    for i, batch in enumerate(loader):
        images = batch['image'].to(device, non_blocking=True)
        target = batch['label'].to(device, non_blocking=True)
        output = model(images)
        loss = criterion(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1[0], images.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    scheduler.step()
    print(f"epoch {epoch} loss {losses.avg:.4f} top1 {float(top1.avg):.2f} lr {scheduler.get_last_lr()[0]:.4f} {batch['meta'][:2]}")
model.eval()
with torch.no_grad():
    out = model(torch.randn(2, 3, 16, 16))
    print(F.softmax(out, dim=1).argmax(dim=1))
state = {'epoch': 3, 'state_dict': model.state_dict(), 'best_acc1': top1.avg, 'optimizer': optimizer.state_dict(), 'scheduler': scheduler.state_dict()}
torch.save(state, sys.argv[1] + '/ck.pth.tar')
ck = torch.load(sys.argv[1] + '/ck.pth.tar')
model.load_state_dict(ck['state_dict']); optimizer.load_state_dict(ck['optimizer']); scheduler.load_state_dict(ck['scheduler'])
print("best", float(ck['best_acc1']))
# export
torch.onnx.export(model, torch.randn(1, 3, 16, 16), sys.argv[1] + '/r.onnx', input_names=['input'], output_names=['output'], dynamic_axes={'input': {0: 'batch'}, 'output': {0: 'batch'}}, opset_version=13)
print(os.path.getsize(sys.argv[1] + '/r.onnx') > 1000)
x = torch.randn(3, 3, 16, 16)
with torch.no_grad():
    want = model(x)
got = torch.onnx.load(sys.argv[1] + '/r.onnx')(x)
import json
print('RESULT', json.dumps({'onnx_max_diff': (got - want).abs().max().item()}))
