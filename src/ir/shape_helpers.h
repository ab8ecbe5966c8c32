// Shape rules shared by many ops.
#pragma once
#include "ir/op_schema.h"

namespace kiln::ir {

/// Normalizes a possibly negative axis into [0, rank); fails naming the node if out of range.
int64_t normalizeAxis(const InferContext& ctx, int64_t axis, int64_t rank);
int64_t normalizeAxis(const Node& node, int64_t axis, int64_t rank);
/// a * b, or a failure naming the node when the product of these dims is past int64
/// (`what` says which: "output dim 0").
int64_t multiplyDims(const Node& node, int64_t a, int64_t b, const std::string& what);

/// a + b, or a failure naming the node when the sum of these dims is past int64.
int64_t addDims(const Node& node, int64_t a, int64_t b, const std::string& what);
/// The sum (product) of two symbolic dims: known when both are, checked as addDims
/// (multiplyDims); else unknown.
Dim sumDims(const Node& node, const Dim& a, const Dim& b, const std::string& what);
Dim productDims(const Node& node, const Dim& a, int64_t b, const std::string& what);

/// ceil(a / b) for a >= 0 and b > 0, without the a + b - 1 that overflows near int64's limit.
inline int64_t ceilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0); }
/// Numpy-style multidirectional broadcast of symbolic shapes; fails on incompatible known dims.
SymShape broadcastSymShapes(const InferContext& ctx, const SymShape& a, const SymShape& b);
/// Concrete broadcast used by kernels; throws naming the node.
Shape broadcastShapes(const Node& node, const Shape& a, const Shape& b);
/// The checks of normalizeAxis and broadcastShapes without a node, for callers that fail through
/// their own context (kernels while running, backends/cpu/kernels/run_checks.h).
bool axisInRange(int64_t axis, int64_t rank);
std::string axisRangeMessage(int64_t axis, int64_t rank);
std::optional<Shape> tryBroadcastShapes(const Shape& a, const Shape& b);
std::string broadcastMessage(const Shape& a, const Shape& b);

/// Output 0 has the dtype and shape of input 0 (unary elementwise ops).
void inferSameAsInput0(InferContext& ctx);
/// Output 0 is the broadcast of every input; dtype of input 0.
void inferBroadcast(InferContext& ctx);
/// Like inferBroadcast, but the output is bool (comparisons).
void inferBroadcastBool(InferContext& ctx);

/// Output 0 of another op's shape rule (domain "", at `opset`) run on this node's inputs `picks`
/// (that op's inputs in order; an index past the node's inputs: omitted), each pick's dtype
/// replaced by `dtypes[k]` where given (kUndefined: keep): how a quantized op borrows the shape
/// rule of the integer op it is built on.
TypeInfo inferThroughOp(const InferContext& ctx, const char* opType, int64_t opset,
                        const std::vector<size_t>& picks, const std::vector<DataType>& dtypes = {});

}  // namespace kiln::ir
