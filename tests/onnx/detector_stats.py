"""BatchNorm statistics for a torchvision detector with random weights,
measured on four random 320x320 images (tests/onnx/real_models.py and
bench/detectors.py both need them). With the initial statistics (mean 0,
variance 1) the activations saturate and most boxes get the same score, so
ties would decide the detections, and PyTorch breaks ties otherwise than
ONNX asks."""


def calibrate_batch_norm(model, tv_name):
    import torch

    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in norms:
        m.momentum = None  # a cumulative average: the four images' own statistics
        m.reset_running_stats()
    model.train()
    with torch.no_grad():
        x = model.transform([torch.rand(3, 320, 320) for _ in range(4)])[0].tensors
        features = model.backbone(x)
        if tv_name.startswith("ssd"):
            model.head(list(features.values()))
    for m in norms:
        m.momentum = 0.1
    model.eval()
    return model
