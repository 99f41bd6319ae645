"""torch.distributed as far as single-process scripts ask it: there are no
process groups in the binding (the C library trains over MPI, `chutney
train --distributed`), so is_available() and is_initialized() are False,
and init_process_group raises saying so."""


def is_available():
    return False


def is_initialized():
    return False


def is_torchelastic_launched():
    return False


def init_process_group(*args, **kwargs):
    raise NotImplementedError(
        "chutney.distributed.init_process_group: no process groups in the Python binding; the C "
        "library trains data-parallel over MPI (`chutney train --distributed`, docs/training.md)")


def _not_initialized(*args, **kwargs):
    raise RuntimeError("Default process group has not been initialized, please make sure to call "
                       "init_process_group.")


get_rank = get_world_size = barrier = all_reduce = broadcast = all_gather = _not_initialized
destroy_process_group = _not_initialized
