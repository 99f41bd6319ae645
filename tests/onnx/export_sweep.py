"""A sweep of PyTorch-exported architectures through Chutney's ONNX import,
against ONNX Runtime: torchvision's video, optical-flow and classification
models and about forty Hugging Face transformers (random weights, small
configs), each exported by PyTorch 2 with the TorchScript exporter (opset
17) and the default one, run by `chutney run --threads 2` and by ONNX
Runtime on the same inputs; one line per model and exporter with the
largest difference relative to the output's largest value (or why it
failed: the export, ONNX Runtime or Chutney).

Not part of `make check`: it needs PyTorch 2, torchvision, transformers,
onnx, onnxscript and onnxruntime, which `sh bench/setup-venv.sh
build/bench-venv` installs (docs/onnx.md, "Sweeps").

    build/bench-venv/bin/python tests/onnx/export_sweep.py CHUTNEY OUT_DIR [NAMES|all] [t|d]

NAMES is a comma-separated subset of the models below; t runs only the
TorchScript exporter, d only the default one (both without).
"""
import re, sys, os, subprocess, time, traceback, warnings
import numpy as np, torch, onnxruntime as ort
warnings.filterwarnings("ignore")
torch.manual_seed(0)
if len(sys.argv) < 3:
    sys.exit(__doc__)
CN, OUT = sys.argv[1], sys.argv[2]
os.makedirs(OUT, exist_ok=True)

def tv(name, *shape, **kw):
    import torchvision.models as M
    import torchvision.models.optical_flow as OF
    import torchvision.models.video as V
    def f():
        ctor = getattr(M, name, None) or getattr(OF, name, None) or getattr(V, name)
        m = ctor(weights=None, **kw).eval()
        return m, tuple(torch.randn(*s) for s in shape)
    return f

import inspect
def flat(o, acc):
    if torch.is_tensor(o): acc.append(o)
    elif hasattr(o, "to_tuple"): flat(o.to_tuple(), acc)
    elif isinstance(o, (tuple, list)):
        for x in o: flat(x, acc)
    return acc
class Wrap(torch.nn.Module):
    def __init__(self, m, names=None):
        super().__init__(); self.m = m; self.names = names
        self.kw = {"use_cache": False} if "use_cache" in inspect.signature(m.forward).parameters else {}
    def forward(self, *a):
        if self.names:  # inputs by name, for models whose positions differ
            return tuple(flat(self.m(**dict(zip(self.names, a)), **self.kw), []))
        return tuple(flat(self.m(*a, **self.kw), []))
def hf(cls_cfg, cls_model, cfgkw, inputs, names=None):
    def f():
        import transformers as T
        cfg = getattr(T, cls_cfg)(**(cfgkw(T) if callable(cfgkw) else cfgkw))
        m = getattr(T, cls_model)(cfg).eval()
        return Wrap(m, names), inputs()
    return f

ids = lambda *s: (lambda: (torch.randint(0, 100, s),))
small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=100)

MODELS = {
 "mvit_v2_s": tv("mvit_v2_s", (1,3,16,224,224)),
 "vit_b_32": tv("vit_b_32", (1,3,224,224)),
 "raft_small": tv("raft_small", (1,3,128,128), (1,3,128,128)),
 "s3d": tv("s3d", (1,3,16,224,224)),
 
 "swin3d_t": tv("swin3d_t", (1,3,8,112,112)),
 
 "wav2vec2": hf("Wav2Vec2Config","Wav2Vec2Model", dict(hidden_size=64,num_hidden_layers=2,num_attention_heads=4,intermediate_size=128,conv_dim=(32,)*7,num_conv_pos_embeddings=16,num_conv_pos_embedding_groups=4), lambda:(torch.randn(1,16000),)),
 "hubert": hf("HubertConfig","HubertModel", dict(hidden_size=64,num_hidden_layers=2,num_attention_heads=4,intermediate_size=128,conv_dim=(32,)*7,num_conv_pos_embeddings=16,num_conv_pos_embedding_groups=4), lambda:(torch.randn(1,16000),)),
 "whisper_enc": hf("WhisperConfig","WhisperForConditionalGeneration", dict(d_model=64,encoder_layers=2,decoder_layers=2,encoder_attention_heads=4,decoder_attention_heads=4,encoder_ffn_dim=128,decoder_ffn_dim=128,vocab_size=100,max_source_positions=1500,pad_token_id=1,bos_token_id=0,eos_token_id=2,decoder_start_token_id=0), lambda:(torch.randn(1,80,3000), torch.randint(0,100,(1,8))), ("input_features", "decoder_input_ids")),
 "clip": hf("CLIPConfig","CLIPModel", dict(text_config=dict(hidden_size=64,num_hidden_layers=2,num_attention_heads=4,intermediate_size=128,vocab_size=100), vision_config=dict(hidden_size=64,num_hidden_layers=2,num_attention_heads=4,intermediate_size=128,image_size=64,patch_size=16)), lambda:(torch.randint(0,100,(2,7)), torch.randn(2,3,64,64))),
 "segformer": hf("SegformerConfig","SegformerForSemanticSegmentation", dict(hidden_sizes=[16,32,64,128],num_attention_heads=[1,2,4,8],decoder_hidden_size=64), lambda:(torch.randn(1,3,128,128),)),
 "mobilevit": hf("MobileViTConfig","MobileViTForImageClassification", dict(image_size=128), lambda:(torch.randn(1,3,128,128),)),
 "deit": hf("DeiTConfig","DeiTModel", dict(small, image_size=64, patch_size=16), lambda:(torch.randn(1,3,64,64),)),
 "bart": hf("BartConfig","BartModel", dict(d_model=64,encoder_layers=2,decoder_layers=2,encoder_attention_heads=4,decoder_attention_heads=4,encoder_ffn_dim=128,decoder_ffn_dim=128,vocab_size=100), ids(1,12)),
 "t5": hf("T5Config","T5ForConditionalGeneration", dict(d_model=64,d_kv=16,d_ff=128,num_layers=2,num_heads=4,vocab_size=100), lambda:(torch.randint(0,100,(1,12)), None, torch.randint(0,100,(1,5)))),
 "albert": hf("AlbertConfig","AlbertModel", dict(small, embedding_size=32), ids(1,12)),
 "deberta_v2": hf("DebertaV2Config","DebertaV2Model", dict(small, relative_attention=True, pos_att_type=["p2c","c2p"], max_relative_positions=32, position_buckets=16), ids(1,12)),
 "electra": hf("ElectraConfig","ElectraModel", dict(small, embedding_size=32), ids(1,12)),
 "xlnet": hf("XLNetConfig","XLNetModel", dict(d_model=64,n_layer=2,n_head=4,d_inner=128,vocab_size=100), ids(1,12)),
 "gpt_neo": hf("GPTNeoConfig","GPTNeoModel", dict(hidden_size=64,num_layers=2,num_heads=4,vocab_size=100,attention_types=[[["global","local"],1]],window_size=4), ids(1,12)),
 "opt": hf("OPTConfig","OPTModel", dict(hidden_size=64,num_hidden_layers=2,num_attention_heads=4,ffn_dim=128,vocab_size=100,word_embed_proj_dim=64), ids(1,12)),
 "bloom": hf("BloomConfig","BloomModel", dict(hidden_size=64,n_layer=2,n_head=4,vocab_size=100), ids(1,12)),
 "falcon": hf("FalconConfig","FalconModel", dict(hidden_size=64,num_hidden_layers=2,num_attention_heads=4,vocab_size=100), ids(1,12)),
 "mistral": hf("MistralConfig","MistralModel", dict(small, num_key_value_heads=2, sliding_window=4), ids(1,12)),
 "phi": hf("PhiConfig","PhiModel", dict(small), ids(1,12)),
 "qwen2": hf("Qwen2Config","Qwen2Model", dict(small, num_key_value_heads=2), ids(1,12)),
 "gemma": hf("GemmaConfig","GemmaModel", dict(small, num_key_value_heads=2, head_dim=16), ids(1,12)),
 "mpnet": hf("MPNetConfig","MPNetModel", dict(small), ids(1,12)),
 "funnel": hf("FunnelConfig","FunnelModel", dict(d_model=64,n_head=4,d_head=16,d_inner=128,block_sizes=[1,1],vocab_size=100), ids(1,12)),
 "convbert": hf("ConvBertConfig","ConvBertModel", dict(small, embedding_size=64), ids(1,12)),
 "beit": hf("BeitConfig","BeitModel", dict(small, image_size=64, patch_size=16, use_relative_position_bias=True), lambda:(torch.randn(1,3,64,64),)),
 "dinov2": hf("Dinov2Config","Dinov2Model", dict(small, image_size=64, patch_size=16), lambda:(torch.randn(1,3,64,64),)),
 "swin_hf": hf("SwinConfig","SwinModel", dict(image_size=64,patch_size=4,embed_dim=32,depths=[1,1],num_heads=[2,4],window_size=4), lambda:(torch.randn(1,3,64,64),)),
 "convnextv2": hf("ConvNextV2Config","ConvNextV2Model", dict(hidden_sizes=[16,32,64,128],depths=[1,1,1,1]), lambda:(torch.randn(1,3,64,64),)),
 "detr": hf("DetrConfig","DetrForObjectDetection", lambda T: dict(use_timm_backbone=False, use_pretrained_backbone=False, backbone=None, backbone_config=T.ResNetConfig(), d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_queries=10), lambda:(torch.randn(1,3,128,128),)),
 "mamba": hf("MambaConfig","MambaModel", dict(hidden_size=64,num_hidden_layers=2,vocab_size=100,state_size=8), ids(1,12)),
 "rwkv": hf("RwkvConfig","RwkvModel", dict(hidden_size=64,num_hidden_layers=2,vocab_size=100,attention_hidden_size=64,intermediate_size=128,context_length=32), ids(1,12)),
 "ast": hf("ASTConfig","ASTModel", dict(small, max_length=128, num_mel_bins=64), lambda:(torch.randn(1,128,64),)),
 "yolos": hf("YolosConfig","YolosForObjectDetection", dict(small, image_size=[64,64], patch_size=16, num_detection_tokens=10), lambda:(torch.randn(1,3,64,64),)),
 "perceiver": hf("PerceiverConfig","PerceiverModel", dict(num_latents=16,d_latents=64,d_model=32,num_blocks=1,num_self_attends_per_block=2,num_self_attention_heads=4,num_cross_attention_heads=4), lambda:(torch.randn(1,20,32),)),
 "led": hf("LEDConfig","LEDModel", dict(d_model=64,encoder_layers=1,decoder_layers=1,encoder_attention_heads=4,decoder_attention_heads=4,encoder_ffn_dim=128,decoder_ffn_dim=128,vocab_size=100,attention_window=[4]), ids(1,16)),
 "bigbird": hf("BigBirdConfig","BigBirdModel", dict(small, attention_type="original_full"), ids(1,12)),
 "esm": hf("EsmConfig","EsmModel", dict(small, pad_token_id=1, position_embedding_type="rotary"), ids(1,12)),
}

def run(name, dynamo):
    tag = name + ("_d" if dynamo else "_t")
    d = os.path.join(OUT, tag); os.makedirs(d, exist_ok=True)
    f = os.path.join(d, "model.onnx")
    m, args = MODELS[name]()
    with torch.no_grad():
        try:
            if dynamo:
                torch.onnx.export(m, args, f, dynamo=True, verbose=False)
            else:
                torch.onnx.export(m, args, f, dynamo=False, opset_version=17)
        except Exception as e:
            return "EXPORT-FAIL " + str(e).splitlines()[0][:150]
    try:
        s = ort.InferenceSession(f, providers=["CPUExecutionProvider"])
    except Exception as e:
        return "ORT-FAIL " + str(e)[:150]
    real = [a for a in args if a is not None]
    feeds = {}
    for i, a in zip(s.get_inputs(), real):
        feeds[i.name] = a.numpy()
    if len(feeds) != len(s.get_inputs()):
        return "INPUTS? %s" % [i.name for i in s.get_inputs()]
    ref = s.run(None, feeds)
    cmd = [CN, "run", f, "--output-dir", d + "/out", "--threads", "2"]
    for k, v in feeds.items():
        np.save(f"{d}/{k}.npy", v); cmd += ["--input", f"{k}={d}/{k}.npy"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return "CN-FAIL " + (r.stderr.strip().splitlines() or ["?"])[-1][:300]
    worst = 0
    for o, rv in zip(s.get_outputs(), ref):
        fn = d + "/out/" + re.sub(r"[^A-Za-z0-9._-]", "_", o.name) + ".npy"
        if not os.path.exists(fn): return "MISSING " + o.name
        cv = np.load(fn)
        if cv.shape != rv.shape: return "SHAPE %s %s %s" % (o.name, cv.shape, rv.shape)
        if rv.size == 0: continue
        if rv.dtype == np.bool_ or np.issubdtype(rv.dtype, np.integer):
            e = float(np.sum(cv != rv))
        else:
            e = float(np.max(np.abs(cv.astype(np.float64) - rv)) / max(1e-6, np.max(np.abs(rv))))
        worst = max(worst, e)
    return "ok %.2e" % worst

names = sys.argv[3].split(",") if len(sys.argv) > 3 and sys.argv[3] != "all" else list(MODELS)
modes = [False, True] if len(sys.argv) < 5 else [sys.argv[4] == "d"]
for n in names:
    for dyn in modes:
        t = time.time()
        try: res = run(n, dyn)
        except Exception as e: res = "PY-FAIL " + repr(e)[:200]
        print("%-14s %s %5.1fs %s" % (n, "dyn" if dyn else "ts ", time.time() - t, res), flush=True)
