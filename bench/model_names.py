"""The benchmark's model names and file names, shared by the harness (venv) and the exporter (system python)."""

# the six models of the first benchmark, then those of issue 20's wider one
DEFAULT_MODELS = [
    "resnet50", "mobilenet_v2", "efficientnet_b0", "squeezenet1_1", "bert_encoder_4l", "srcnn",
    "mobilenet_v3_large", "shufflenet_v2_x1_0", "regnet_y_400mf", "resnext50_32x4d", "convnext_tiny", "vit_b_16",
    "deeplabv3_mobilenet_v3_large", "lstm_2l", "yolo_v5s", "crnn",
]


def model_file_name(name, batch):
    """NAME.onnx at batch 1 (the file name of the first benchmark), NAME_bB.onnx at batch B."""
    return f"{name}.onnx" if batch == 1 else f"{name}_b{batch}.onnx"
