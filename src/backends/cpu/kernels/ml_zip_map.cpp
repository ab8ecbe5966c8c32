// ai.onnx.ml ZipMap: each row of class scores X (N, C), or the one row of a 1-D X, becomes a map
// from the node's class labels to that row's scores; the output is the sequence of those maps.
#include <map>

#include "backends/cpu/kernel_registry.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

// The map's keys in ascending order, each with the column of X it takes its score from. A label
// given twice keeps its last column, as onnxruntime's std::map assignment does.
struct MapLayout {
  Tensor keys;
  std::vector<int64_t> columns;
  int64_t labelCount = 0;  // X's columns: one per label as the node lists them
};

template <typename Key>
MapLayout layoutOf(const std::vector<Key>& labels, DataType keyType) {
  std::map<Key, int64_t> lastColumn;
  for (size_t j = 0; j < labels.size(); ++j) lastColumn[labels[j]] = static_cast<int64_t>(j);
  std::vector<Key> keys;
  MapLayout layout;
  for (const auto& [key, column] : lastColumn) {
    keys.push_back(key);
    layout.columns.push_back(column);
  }
  layout.keys = Tensor::fromVector(keyType, {static_cast<int64_t>(keys.size())}, keys);
  layout.labelCount = static_cast<int64_t>(labels.size());
  return layout;
}

KernelFn makeZipMap(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  const MapLayout layout =
      ir::hasAttr(node, "classlabels_strings")
          ? layoutOf(ir::attrStrings(node, "classlabels_strings"), DataType::kString)
          : layoutOf(ir::attrInts(node, "classlabels_int64s"), DataType::kInt64);
  return [layout](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const int64_t columns = x.rank() == 0 ? 1 : x.shape().back();
    if (x.rank() < 1 || x.rank() > 2 || columns != layout.labelCount) {
      ctx.fail("X is " + x.describe() +
                   ": ZipMap needs 1-D or 2-D scores with one column per class label (" +
                   std::to_string(layout.labelCount) + ")",
               ErrorCode::kInvalidArgument);
    }
    const int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
    const auto entries = static_cast<int64_t>(layout.columns.size());
    std::vector<Tensor> maps;
    maps.reserve(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      // Copied: X may live in the run's arena, which later layers and runs reuse.
      Tensor scores(DataType::kFloat32, {entries});
      const float* row = x.data<float>() + r * columns;
      for (int64_t k = 0; k < entries; ++k) scores.data<float>()[k] = row[layout.columns[k]];
      maps.push_back(Tensor::map(layout.keys, std::move(scores)));
    }
    ctx.setOutput(0,
                  Tensor::sequenceOfMaps(layout.keys.dtype(), DataType::kFloat32, std::move(maps)));
  };
}

KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "ZipMap", KernelFactory(makeZipMap));

}  // namespace
}  // namespace kiln::cpu
