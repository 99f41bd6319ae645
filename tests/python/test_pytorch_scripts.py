"""Whole training scripts written as PyTorch scripts are (tests/python/
scripts/, each `import chutney as torch`): each must run to its end, and
what it prints last (RESULT, a JSON object) must show it worked: losses
finite and falling where the script trains long enough to tell, outputs in
their ranges, files written and read back."""

import json
import math
import os
import subprocess
import sys

import pytest

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")


def run(name, tmp_path):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    p = subprocess.run([sys.executable, os.path.join(HERE, name + ".py"), str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def finite(xs):
    return all(math.isfinite(x) for x in xs)


def test_gan(tmp_path):
    r = run("gan", tmp_path)
    assert finite(r["losses"]) and -1 <= r["fake_range"][0] <= r["fake_range"][1] <= 1


def test_vae(tmp_path):
    r = run("vae", tmp_path)
    assert finite(r["epoch_losses"]) and r["epoch_losses"][1] < r["epoch_losses"][0]


def test_lstm_classifier_on_packed_sequences(tmp_path):
    r = run("lstm_cls", tmp_path)
    assert finite(r["losses"]) and r["losses"][-1] < r["losses"][0]
    assert all(abs(s - 1) < 1e-5 for s in r["prob_sums"])


def test_seq2seq_with_attention(tmp_path):
    r = run("seq2seq", tmp_path)
    assert all(b < a for a, b in zip(r["losses"], r["losses"][1:]))
    assert all(0 <= t < 20 for t in r["tokens"])


def test_nanogpt(tmp_path):
    r = run("nanogpt", tmp_path)
    assert math.isfinite(r["loss"]) and len(r["generated"]) == 2
    assert all(len(g) == 21 and all(0 <= t < 65 for t in g) for g in r["generated"])


def test_resnet_loop_and_onnx_export(tmp_path):
    r = run("resnet", tmp_path)
    assert r["onnx_max_diff"] < 1e-4


def test_transformer_language_model_tutorial(tmp_path):
    r = run("tlm", tmp_path)
    assert finite(r["val_losses"]) and abs(r["best_again"] - r["best"]) < 1e-5


def test_ddpm(tmp_path):
    r = run("ddpm", tmp_path)
    assert finite(r["losses"]) and r["losses"][-1] < r["losses"][0]
    assert math.isfinite(r["sample_max"])


def test_time_sequence_prediction_float64_lbfgs(tmp_path):
    r = run("tsp", tmp_path)
    assert r["dtype"] == "float64" and r["train_losses"][-1] < r["train_losses"][0]


def test_ppo_update(tmp_path):
    r = run("ppo", tmp_path)
    assert all(finite(f) for f in r["finals"])


def test_tabular_classifier(tmp_path):
    r = run("tab", tmp_path)
    assert r["acc"] > 0.85 and math.isfinite(r["best_loss"])
