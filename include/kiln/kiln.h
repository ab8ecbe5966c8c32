// Everything of kiln's public API.
#pragma once
#include "kiln/builder.h"
#include "kiln/dtype.h"
#include "kiln/engine.h"
#include "kiln/error.h"
#include "kiln/logger.h"
#include "kiln/network.h"
#include "kiln/npy.h"
#include "kiln/onnx_parser.h"
#include "kiln/plugin.h"
#include "kiln/session.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
