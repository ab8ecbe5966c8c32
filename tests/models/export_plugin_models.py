#!/usr/bin/python3
"""Export the models of kiln's example plugins from PyTorch to ONNX, with reference data.

Runs under Debian's system python (python3-torch 1.13, python3-torchvision 0.14),
not the repo venv:

    /usr/bin/python3 tests/models/export_plugin_models.py --out build/models [--only NAME ...] [--list]

Each model's operator is one that no ONNX importer knows, emitted by a custom
symbolic() exactly as deployment tutorials do, so kiln must run it through a plugin:

  srcnn_dynamic_trt_resize  Test::DynamicTRTResize(input, size_tensor), align_corners=0, inside the
                            OpenMMLab tutorial's SRCNN; the output size comes from size_tensor's
                            dims 2 and 3 (its values are ignored), dynamic H/W axes
  trt_resize_align_corners  Test::DynamicTRTResize alone, align_corners=1
  myselu                    MYSELU(x, p, const) in the default domain with attr1_s, attr2_i=[1, 2, 3],
                            attr3_f=222 after a Conv; p is a parameter, const a Constant
  deform_conv2d             custom::deform_conv2d(input, weight, offset, mask, bias) with groups=2,
                            offset_groups=2, a mask, and non-trivial stride, padding and dilation;
                            offset and mask computed by Conv layers from the input
  deform_conv2d_no_mask     the same op with mask and bias absent (empty input names)

For model NAME this writes, under OUT:
  NAME.onnx                 the model (written last, so its presence means the rest is complete)
  NAME.ref/CASE/<tensor>.npy    the inputs of each reference case and PyTorch's outputs for them
  NAME.json                 manifest: {"model", "inputs", "outputs", "profile" (--min/opt/max-shapes
                            for `kiln build`, when the model has dynamic axes), "cases": [{"name",
                            "inputs": {tensor: file}, "outputs": {tensor: file}}]}, paths relative to OUT.
Weights are random (torch.manual_seed(0) before each model). Existing NAME.onnx files are kept as
a cache, keyed by file name only.
"""
import argparse
import json
import os
import shutil
import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.onnx import symbolic_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_models import SRCNN  # noqa: E402  (the tutorial's three-conv body, shared with srcnn_dynamic)

OPSET = 11

# Expected noise: torch 1.13 deprecates g.op() on the graph a Function's symbolic receives (the
# tutorials' way of writing it), and cannot infer the shapes of custom ops.
warnings.filterwarnings("ignore", message=".*_graph_op' is deprecated", category=FutureWarning)
warnings.filterwarnings("ignore", message="The shape inference of .* type is missing", category=UserWarning)


@dataclass
class PluginExport:
    """One model, the arguments it is traced with, and the reference cases to save."""

    module: nn.Module
    args: tuple
    input_names: list
    output_names: list
    cases: dict  # case name -> tuple of input tensors, in input_names order
    dynamic_axes: dict = field(default_factory=dict)
    profile: dict = field(default_factory=dict)  # {"min_shapes"|"opt_shapes"|"max_shapes": {input: dims}}


# --- Test::DynamicTRTResize (OpenMMLab deployment tutorial) -------------------


class DynamicTRTResize(torch.autograd.Function):
    """Bicubic resize of input to the height and width of size_tensor (its values are unused)."""

    @staticmethod
    def forward(ctx, input, size_tensor, align_corners):
        size = [size_tensor.size(-2), size_tensor.size(-1)]
        return F.interpolate(input, size=size, mode="bicubic", align_corners=align_corners)

    @staticmethod
    def symbolic(g, input, size_tensor, align_corners):
        return g.op("Test::DynamicTRTResize", input, size_tensor, align_corners_i=int(align_corners))


class DynamicResize(nn.Module):
    def __init__(self, align_corners):
        super().__init__()
        self.align_corners = align_corners

    def forward(self, x, size_tensor):
        return DynamicTRTResize.apply(x, size_tensor, self.align_corners)


def build_srcnn_dynamic_trt_resize():
    # Separate dim names: the image and the requested size vary independently.
    image_axes = {2: "in_height", 3: "in_width"}
    size_axes = {2: "out_height", 3: "out_width"}
    return PluginExport(
        SRCNN(DynamicResize(align_corners=False)),
        (torch.randn(1, 3, 256, 256), torch.randn(1, 1, 512, 512)),
        ["input", "size_tensor"],
        ["output"],
        cases={
            # The tutorial's run: a 256x256 image to the 768x768 of size_tensor.
            "768": (torch.randn(1, 3, 256, 256), torch.randn(1, 1, 768, 768)),
            # Another size at run time, from a smaller image and to a size that is no multiple of it.
            "300": (torch.randn(1, 3, 128, 128), torch.randn(1, 1, 300, 300)),
        },
        dynamic_axes={"input": image_axes, "size_tensor": size_axes, "output": size_axes},
        profile={
            "min_shapes": {"input": [1, 3, 128, 128], "size_tensor": [1, 1, 256, 256]},
            "opt_shapes": {"input": [1, 3, 256, 256], "size_tensor": [1, 1, 512, 512]},
            "max_shapes": {"input": [1, 3, 256, 256], "size_tensor": [1, 1, 1024, 1024]},
        },
    )


def build_trt_resize_align_corners():
    return PluginExport(
        DynamicResize(align_corners=True),
        (torch.randn(2, 3, 5, 7), torch.randn(1, 1, 9, 4)),
        ["input", "size_tensor"],
        ["output"],
        cases={"9x4": (torch.randn(2, 3, 5, 7), torch.randn(1, 1, 9, 4))},
    )


# --- MYSELU (an op_type in the default domain that ONNX does not define) ------


class MySeluFunction(torch.autograd.Function):
    """y = x * sigmoid(x); p and the symbolic's constant only show that extra inputs reach the plugin."""

    @staticmethod
    def forward(ctx, x, p):
        return x * torch.sigmoid(x)

    @staticmethod
    def symbolic(g, x, p):
        const = g.op("Constant", value_t=torch.tensor([3, 2, 1], dtype=torch.float32))
        return g.op("MYSELU", x, p, const, attr1_s="this is a string attribute", attr2_i=[1, 2, 3], attr3_f=222.0)


class MySeluNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.param = nn.Parameter(torch.arange(8, dtype=torch.float32))

    def forward(self, x):
        return MySeluFunction.apply(self.conv(x), self.param)


def build_myselu():
    # Inputs scaled up so that the conv output spans both tails of the sigmoid.
    return PluginExport(
        MySeluNet(),
        (torch.randn(1, 3, 16, 16),),
        ["input"],
        ["output"],
        cases={"random": (4.0 * torch.randn(1, 3, 16, 16),)},
    )


# --- custom::deform_conv2d (torchvision.ops.deform_conv2d) --------------------


@symbolic_helper.parse_args("v", "v", "v", "v", "v", "i", "i", "i", "i", "i", "i", "i", "i", "b")
def deform_conv2d_symbolic(
    g, input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, offset_groups, use_mask
):
    # torchvision substitutes a zero tensor for a missing mask or bias; export those as absent inputs.
    if not use_mask:
        mask = symbolic_helper._optional_input_placeholder_tensor(g)
    bias_value = symbolic_helper._maybe_get_const(bias, "t")
    if isinstance(bias_value, torch.Tensor) and not bool(bias_value.any()):
        bias = symbolic_helper._optional_input_placeholder_tensor(g)
    return g.op(
        "custom::deform_conv2d",
        input,
        weight,
        offset,
        mask,
        bias,
        stride_i=[stride_h, stride_w],
        padding_i=[pad_h, pad_w],
        dilation_i=[dil_h, dil_w],
        groups_i=groups,
        offset_groups_i=offset_groups,
        use_mask_i=int(use_mask),
    )


class DeformConvNet(nn.Module):
    """DCNv2-style block: Conv layers predict offsets (and a sigmoid mask) for a deformable conv."""

    def __init__(self, use_mask, use_bias, in_channels=4, out_channels=6, kernel=(3, 3), groups=2, offset_groups=2,
                 stride=(2, 1), padding=(2, 1), dilation=(2, 1)):
        super().__init__()
        taps = kernel[0] * kernel[1]
        geometry = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation)
        self.offset_conv = nn.Conv2d(in_channels, 2 * offset_groups * taps, **geometry)
        self.mask_conv = nn.Conv2d(in_channels, offset_groups * taps, **geometry) if use_mask else None
        self.weight = nn.Parameter(0.3 * torch.randn(out_channels, in_channels // groups, *kernel))
        self.bias = nn.Parameter(torch.randn(out_channels)) if use_bias else None
        self.geometry = dict(stride=stride, padding=padding, dilation=dilation)

    def forward(self, x):
        offset = 3.0 * self.offset_conv(x)  # offsets of a few pixels, some leaving the image
        mask = torch.sigmoid(self.mask_conv(x)) if self.mask_conv is not None else None
        return torchvision.ops.deform_conv2d(x, offset, self.weight, self.bias, mask=mask, **self.geometry)


def build_deform_conv2d():
    return PluginExport(
        DeformConvNet(use_mask=True, use_bias=True),
        (torch.randn(2, 4, 10, 12),),
        ["input"],
        ["output"],
        cases={"random": (torch.randn(2, 4, 10, 12),)},
    )


def build_deform_conv2d_no_mask():
    return PluginExport(
        DeformConvNet(use_mask=False, use_bias=False, groups=1, offset_groups=1, stride=(1, 1), padding=(1, 1),
                      dilation=(1, 1)),
        (torch.randn(1, 4, 9, 7),),
        ["input"],
        ["output"],
        cases={"random": (torch.randn(1, 4, 9, 7),)},
    )


# --- driver ------------------------------------------------------------------

MODELS = {
    "srcnn_dynamic_trt_resize": build_srcnn_dynamic_trt_resize,
    "trt_resize_align_corners": build_trt_resize_align_corners,
    "myselu": build_myselu,
    "deform_conv2d": build_deform_conv2d,
    "deform_conv2d_no_mask": build_deform_conv2d_no_mask,
}


def save_reference(spec, name, out):
    """Run every case through PyTorch and write its inputs and outputs; returns the manifest's cases."""
    ref_dir = os.path.join(out, name + ".ref")
    shutil.rmtree(ref_dir, ignore_errors=True)
    cases = []
    for case, inputs in spec.cases.items():
        case_dir = os.path.join(ref_dir, case)
        os.makedirs(case_dir)
        with torch.no_grad():
            outputs = spec.module(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        entry = {"name": case, "inputs": {}, "outputs": {}}
        for kind, names, tensors in (("inputs", spec.input_names, inputs), ("outputs", spec.output_names, outputs)):
            for tensor_name, tensor in zip(names, tensors):
                file = os.path.join(name + ".ref", case, f"{kind[:-1]}_{tensor_name}.npy")
                np.save(os.path.join(out, file), tensor.detach().numpy())
                entry[kind][tensor_name] = file
        cases.append(entry)
    return cases


def export_model(name, out):
    """Export one model with its reference data; the .onnx is moved into place last."""
    torch.manual_seed(0)
    spec = MODELS[name]()
    spec.module.eval()
    path = os.path.join(out, name + ".onnx")
    partial = path + ".partial"
    torch.onnx.export(
        spec.module,
        spec.args,
        partial,
        input_names=spec.input_names,
        output_names=spec.output_names,
        dynamic_axes=spec.dynamic_axes,
        opset_version=OPSET,
        # The checker rejects MYSELU (no such op in the default domain); the model is still what
        # deployment tools export, so skip it rather than change the model.
        operator_export_type=torch.onnx.OperatorExportTypes.ONNX_FALLTHROUGH,
        keep_initializers_as_inputs=False,  # FALLTHROUGH would otherwise list weights as graph inputs
    )
    manifest = {
        "model": name + ".onnx",
        "inputs": spec.input_names,
        "outputs": spec.output_names,
        "profile": spec.profile,
        "cases": save_reference(spec, name, out),
    }
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(manifest, f, indent=2)
    os.replace(partial, path)


def register_symbolics():
    torch.onnx.register_custom_op_symbolic("torchvision::deform_conv2d", deform_conv2d_symbolic, OPSET)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="output directory (created if missing)")
    parser.add_argument("--only", nargs="+", choices=list(MODELS), metavar="NAME", help="export only these models")
    parser.add_argument("--list", action="store_true", help="print the model names and exit")
    options = parser.parse_args(argv)
    if not options.list and not options.out:
        parser.error("--out is required")
    return options


def main(argv):
    options = parse_args(argv)
    if options.list:
        print("\n".join(MODELS))
        return 0
    register_symbolics()
    os.makedirs(options.out, exist_ok=True)
    for name in options.only or MODELS:
        path = os.path.join(options.out, name + ".onnx")
        if os.path.exists(path):
            print(f"{name:30} {os.path.getsize(path) / 1e6:8.2f} MB   cached", flush=True)
            continue
        start = time.perf_counter()
        export_model(name, options.out)
        seconds = time.perf_counter() - start
        print(f"{name:30} {os.path.getsize(path) / 1e6:8.2f} MB {seconds:6.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
