"""A PyTorch model exported untrained to ONNX, for `chutney train
--model-file` (docs/training.md, "Your own model: ONNX"): a small CNN for
12x12 RGB images and 3 classes (conv, BatchNorm, ReLU, max pool, dropout,
linear). Replace Net with your own module and the dummy input with one of
your images' shape.

    python3 examples/export_pytorch_cnn.py net.onnx
    build/chutney train --model-file net.onnx --data photos/ --image-size 12x12

The export keeps BatchNorm and Dropout as training layers
(TrainingMode.TRAINING; the default evaluation-mode export folds BatchNorm
into the convolution and drops Dropout) and leaves the batch size symbolic.
tests/cli/onnx_train_cli.sh runs this file."""
import sys

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(8 * 6 * 6, 3)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc(self.drop(torch.flatten(x, 1)))


def export(model, path, example):
    model.train()
    torch.onnx.export(model, example, path, input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
                      training=torch.onnx.TrainingMode.TRAINING)


if __name__ == "__main__":
    torch.manual_seed(0)
    export(Net(), sys.argv[1] if len(sys.argv) > 1 else "net.onnx", torch.zeros(2, 3, 12, 12))
