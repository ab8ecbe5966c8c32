// Cast and CastLike where the source or the target is a low-precision type (float8, float4,
// int4, uint4, int2, uint2): every value goes through its exact float or integer value.
#pragma once
#include "backends/cpu/kernel.h"
#include "core/low_precision.h"

namespace kiln::cpu {

/// The conversion options of a Cast / CastLike node: `saturate` (opset 19+, default 1) and
/// `round_mode` (opset 24+, default "up"); fails on an unknown round_mode.
LowPrecisionOptions castOptions(const ir::Node& node);

/// y = x converted element by element; x or y is a low-precision type, neither is a string.
void castLowPrecision(const Tensor& x, Tensor& y, const LowPrecisionOptions& options);

}  // namespace kiln::cpu
