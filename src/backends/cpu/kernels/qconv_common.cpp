#include "backends/cpu/kernels/qconv_common.h"

#include <algorithm>
#include <optional>

#include "backends/cpu/kernels/channels_last.h"
#include "backends/cpu/kernels/qgemm_op_support.h"
#include "backends/cpu/thread_pool.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {

QConv qconvOf(const KernelCreateInfo& info, const QProductSignature& s) {
  QConv c;
  c.s = s;
  c.channelsLast = ir::attrInt(info.node, "channels_last", 0) != 0;
  const ir::TypeInfo* x = inputType(info, s.a);
  std::optional<ir::TypeInfo> xFirst;  // X's type channels-first, as convAttrs reads it
  if (c.channelsLast && x && x->shape && x->shape->size() >= 2) {
    xFirst = *x;
    std::rotate(xFirst->shape->begin() + 1, xFirst->shape->end() - 1, xFirst->shape->end());
    x = &*xFirst;
  }
  // convAttrs reads X and W as inputs 0 and 1.
  const KernelCreateInfo inner{info.node,
                               {x, inputType(info, s.b)},
                               {nullptr, constantInput(info, s.b)},
                               {},
                               info.subgraphs};
  c.attrs = convAttrs(inner, false);
  const Tensor& w = *constantInput(info, s.b);
  c.wShape = w.shape();
  c.outChannels = w.dim(0);
  c.groupOut = c.outChannels / std::max<int64_t>(c.attrs.group, 1);
  c.groupChannels = w.dim(1);
  c.kernelSize = shapeNumel(Shape(w.shape().begin() + 2, w.shape().end()));
  c.depth = c.groupChannels * c.kernelSize;
  c.xSigned = inputType(info, s.a)->dtype == DataType::kInt8;
  return c;
}

ir::ConvGeometry qconvGeometry(const KernelContext* ctx, const QConv& c, const Shape& xShape) {
  const Shape x = c.channelsLast ? channelsFirstShape(xShape) : xShape;
  const ConvAttrs& a = c.attrs;
  if (x.size() != c.wShape.size() || x[1] != c.groupChannels * a.group) {
    const std::string message = "X " + shapeToString(x) + " does not fit W " +
                                shapeToString(c.wShape) + " and group " + std::to_string(a.group);
    if (ctx) ctx->fail(message, ErrorCode::kInvalidArgument);
    ir::failNode(a.node, message);
  }
  const Shape xs(x.begin() + 2, x.end()), ws(c.wShape.begin() + 2, c.wShape.end());
  if (a.geometry && xs == *a.xSpatial && ws == *a.wSpatial) return *a.geometry;
  return ir::convGeometry(a.node, xs, ws);
}

uint64_t qconvParamBytes(const QConv& c) {
  return 2 * alignTo64(static_cast<uint64_t>(c.outChannels) * 4);
}

bool startQConvCall(KernelContext& ctx, const QConv& c, int32_t wShift, void* params,
                    QConvCall& call) {
  const QProductSignature& s = c.s;
  call.x = &ctx.input(static_cast<size_t>(s.a));
  const Shape xs = c.channelsLast ? channelsFirstShape(call.x->shape()) : call.x->shape();
  call.g = qconvGeometry(&ctx, c, call.x->shape());
  call.imageShape.assign(xs.begin() + 2, xs.end());
  call.batch = xs[0];
  call.imageSize = shapeNumel(call.imageShape);
  call.outSize = shapeNumel(call.g.output);
  call.y = &ctx.output(0);
  if (call.y->numel() == 0) return false;

  float* multipliers = static_cast<float*>(params);
  int32_t* wZero = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(params) +
                                              alignTo64(static_cast<uint64_t>(c.outChannels) * 4));
  int32_t xZero = 0;
  loadZeroPoints(ctx, s.aZero, "x_zero_point", 1, 0, &xZero);
  call.xZero = xZero;
  call.wZeroCount = loadZeroPoints(ctx, s.bZero, "w_zero_point", c.outChannels, wShift, wZero);
  call.wZero = wZero;
  call.bias = productBias(ctx, s, c.outChannels);
  call.out =
      productOutput(ctx, s, call.y->dtype(), c.outChannels, "x_scale", "w_scale", multipliers);
  const QGemmOutput& out = call.out;
  call.outElement = out.dtype == DataType::kUint8 || out.dtype == DataType::kInt8 ? 1 : 4;
  return true;
}

void fillChannelTerms(const QConvCall& call, const int32_t* weightSums, int64_t channels,
                      int32_t* terms) {
  for (int64_t o = 0; o < channels; ++o) {
    const int64_t add = (call.bias ? call.bias[o] : 0) - int64_t{call.xZero} * weightSums[o];
    terms[o] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(add)));
  }
}

std::vector<int16_t> depthwiseWeights(const KernelCreateInfo& info, const QProductSignature& s) {
  const Tensor& w = *constantInput(info, s.b);
  std::vector<int16_t> values(static_cast<size_t>(w.numel()));
  for (int64_t i = 0; i < w.numel(); ++i) {
    values[static_cast<size_t>(i)] =
        w.dtype() == DataType::kInt8 ? w.data<int8_t>()[i] : w.data<uint8_t>()[i];
  }
  return values;
}

const Shape* qconvInputShape(const QConv& c, const std::vector<const Shape*>& shapes) {
  const size_t input = static_cast<size_t>(c.s.a);
  const Shape* x = input < shapes.size() ? shapes[input] : nullptr;
  return x && x->size() == c.wShape.size() ? x : nullptr;
}

}  // namespace kiln::cpu
