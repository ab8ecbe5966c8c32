// Shape rules of Col2Im (opset 18): input (N, C * prod(block_shape), L) -> (N, C, *image_shape),
// where L is the number of sliding blocks that fit the padded image.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferCol2Im(InferContext& ctx) {
  const DataType dtype = ctx.inputType(0);
  if (dtype == DataType::kString) ctx.fail("does not accept string", ErrorCode::kUnsupportedNode);
  const SymShape* in = ctx.inputShape(0);
  if (in && in->size() != 3)
    ctx.fail("input must be (N, C * prod(block_shape), L), got " + symShapeToString(*in));
  const auto image = ctx.inputInts(1);
  const auto block = ctx.inputInts(2);
  if (image && block && image->size() != block->size())
    ctx.fail("image_shape and block_shape must have the same length");
  if (!in || !image || !block) {
    ctx.setOutputType(0, dtype);
    return;
  }
  int64_t blockSize = 1;
  for (int64_t b : *block) {
    if (b <= 0) ctx.fail("block_shape values must be positive");
    blockSize = multiplyDims(ctx.node(), blockSize, b, "prod(block_shape)");
  }
  Dim channels = Dim::unknown();
  if ((*in)[1].isKnown()) {
    if ((*in)[1].value % blockSize != 0) {
      ctx.fail("input dim 1 (" + std::to_string((*in)[1].value) +
               ") is not a multiple of prod(block_shape) = " + std::to_string(blockSize));
    }
    channels = Dim::known((*in)[1].value / blockSize);
  }
  SymShape out{(*in)[0], channels};
  for (int64_t d : *image) out.push_back(Dim::known(d));
  ctx.setOutput(0, dtype, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Col2Im", 18, 1000, inferCol2Im});

}  // namespace kiln::ir
