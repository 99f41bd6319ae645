"""torch.nn.DataParallel and nn.parallel.DistributedDataParallel.

DataParallel over one process and one device is the module it wraps (as
PyTorch's is with one device): forward passes through, and its state_dict
keys carry the "module." prefix scripts expect. DistributedDataParallel
needs torch.distributed's process groups, which the binding does not have
(the C library trains over MPI: `chutney train --distributed`,
docs/training.md); it raises saying so."""

from chutney.nn.modules import Module


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device, self.dim = output_device, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


class DistributedDataParallel(Module):
    def __init__(self, module, *args, **kwargs):
        raise NotImplementedError(
            "DistributedDataParallel: chutney's Python binding has no torch.distributed process "
            "groups; the C library trains data-parallel over MPI (`chutney train --distributed`, "
            "docs/training.md)")
