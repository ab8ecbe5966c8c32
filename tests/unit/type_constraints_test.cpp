// Operator type constraints (src/ir/type_constraints.h): ONNX's sets, kiln's narrowings, and the
// check shape inference runs on a node's input dtypes.
#include <gtest/gtest.h>

#include "ir/op_schema.h"
#include "ir/type_constraints.h"

namespace kiln::ir {
namespace {

// A graph with one node `op` (named "n") over inputs of the given dtypes, named a, b, c, ...
Graph oneNode(const std::string& op, int64_t opset, const std::vector<DataType>& inputs) {
  Graph g;
  Node node;
  node.name = "n";
  node.opType = op;
  node.opset = opset;
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(
        g.addValue(std::string(1, static_cast<char>('a' + i)), TypeInfo{inputs[i], SymShape{}}));
  }
  node.outputs.push_back(g.addValue("y"));
  g.nodes.push_back(node);
  return g;
}

std::string inferError(Graph g) {
  try {
    inferShapes(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TypeConstraints, AddTakesOnnxNumericTypesAndNoStrings) {
  OpTypes t = kilnOpTypes("", "Add", 1, 1000);
  const TypeSignature* add14 = t.at(14);
  ASSERT_NE(add14, nullptr);
  EXPECT_EQ(add14->sinceVersion, 14);
  const TypeConstraint* c = add14->inputConstraint(1);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->name, "T");
  EXPECT_TRUE(dtypeSetHas(c->allowed, DataType::kInt8));
  EXPECT_TRUE(dtypeSetHas(c->allowed, DataType::kBFloat16));
  EXPECT_FALSE(dtypeSetHas(c->allowed, DataType::kString));
  EXPECT_FALSE(dtypeSetHas(c->allowed, DataType::kBool));
}

TEST(TypeConstraints, OldOpsetsAcceptWhatLaterVersionsAdded) {
  // ONNX's Add-6 allows no int8 (Add-14 added it); kiln's kernel is the same at every opset.
  OpTypes add = kilnOpTypes("", "Add", 1, 1000);
  const TypeSignature* add6 = add.at(6);
  ASSERT_NE(add6, nullptr);
  EXPECT_EQ(add6->sinceVersion, 6);
  EXPECT_TRUE(dtypeSetHas(add6->inputConstraint(0)->allowed, DataType::kInt8));
  EXPECT_FALSE(dtypeSetHas(add6->inputConstraint(0)->onnxAllowed, DataType::kComplex64));
}

TEST(TypeConstraints, KilnLimitsNarrowWithAReason) {
  OpTypes nonZero = kilnOpTypes("", "NonZero", 9, 1000);
  const TypeSignature* nz = nonZero.at(13);
  ASSERT_NE(nz, nullptr);
  const TypeConstraint* c = nz->inputConstraint(0);
  EXPECT_TRUE(dtypeSetHas(c->onnxAllowed, DataType::kString));
  EXPECT_FALSE(dtypeSetHas(c->allowed, DataType::kString));
  EXPECT_FALSE(c->note.empty());
  // Unchecked ops keep no signature, only the reason.
  OpTypes cast = kilnOpTypes("", "Cast", 1, 1000);
  EXPECT_TRUE(cast.signatures.empty());
  EXPECT_FALSE(cast.note.empty());
  // Ops ONNX does not define (kiln's fused ops, plugins) are not checked.
  EXPECT_TRUE(kilnOpTypes("kiln", "FusedConv", 1, 1000).signatures.empty());
}

TEST(TypeConstraints, VariadicInputsShareTheLastVariable) {
  OpTypes concatTypes = kilnOpTypes("", "Concat", 1, 1000);
  const TypeSignature* concat = concatTypes.at(13);
  ASSERT_NE(concat, nullptr);
  ASSERT_NE(concat->inputConstraint(5), nullptr);
  EXPECT_EQ(concat->inputConstraint(5)->name, "T");
  EXPECT_TRUE(dtypeSetHas(concat->inputConstraint(5)->allowed, DataType::kString));
}

TEST(TypeConstraints, CompactNamesCollapseRunsOfOneFamily) {
  DTypeSet s = dtypeBit(DataType::kFloat16) | dtypeBit(DataType::kFloat32) |
               dtypeBit(DataType::kFloat64) | dtypeBit(DataType::kBFloat16) |
               dtypeBit(DataType::kInt8) | dtypeBit(DataType::kInt16) | dtypeBit(DataType::kInt32) |
               dtypeBit(DataType::kInt64) | dtypeBit(DataType::kUint32) |
               dtypeBit(DataType::kUint64) | dtypeBit(DataType::kBool);
  EXPECT_EQ(dtypeSetToCompactString(s),
            "float16..float64, bfloat16, int8..int64, uint32, uint64, bool");
  EXPECT_EQ(dtypeSetToString(dtypeBit(DataType::kFloat32) | dtypeBit(DataType::kInt64)),
            "float32, int64");
}

TEST(TypeConstraints, ShapeInferenceRejectsAStringAddNamingInputAndAcceptedTypes) {
  std::string error = inferError(oneNode("Add", 14, {DataType::kString, DataType::kString}));
  EXPECT_NE(error.find("node 'n' (Add): input 0 'a' is string; Add-14 accepts float16, float32, "
                       "float64, bfloat16, "
                       "int8, int16, int32, int64, uint8, uint16, uint32, uint64 (T)"),
            std::string::npos)
      << error;
}

TEST(TypeConstraints, UnsupportedButValidDtypeIsReportedAsUnsupported) {
  Graph g = oneNode("NonZero", 13, {DataType::kString});
  try {
    inferShapes(g);
    FAIL() << "NonZero of strings was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupportedNode);
    EXPECT_NE(std::string(e.what()).find("input 0 'a' is string; NonZero-13 accepts"),
              std::string::npos)
        << e.what();
  }
}

TEST(TypeConstraints, FixedTypeInputsAreCheckedAndAcceptedTypesPass) {
  EXPECT_EQ(inferError(oneNode("Add", 7, {DataType::kInt32, DataType::kInt32})), "");
  EXPECT_EQ(inferError(oneNode("Sigmoid", 13, {DataType::kBFloat16})), "");
  std::string error = inferError(oneNode("Reshape", 14, {DataType::kFloat32, DataType::kFloat32}));
  EXPECT_NE(error.find("input 1 'b' is float32; Reshape-14 accepts int64 (tensor(int64))"),
            std::string::npos)
      << error;
}

TEST(TypeConstraints, SequencesOptionalsAndUnknownDtypesAreNotChecked) {
  Node node;
  node.name = "n";
  node.opType = "Identity";
  node.opset = 16;
  OpTypes types = kilnOpTypes("", "Identity", 1, 1000);
  TypeInfo unknown{DataType::kUndefined};
  TypeInfo sequence{DataType::kFloat32, std::nullopt, true};
  TypeInfo optional{DataType::kFloat32, std::nullopt, false, true};
  EXPECT_NO_THROW(checkInputTypes(node, types, {&unknown}, {"a"}));
  EXPECT_NO_THROW(checkInputTypes(node, types, {&sequence}, {"a"}));
  EXPECT_NO_THROW(checkInputTypes(node, types, {&optional}, {"a"}));
}

TEST(TypeConstraints, OmittedInputsMustBeOptional) {
  Node clip;
  clip.name = "c";
  clip.opType = "Clip";
  clip.opset = 13;
  clip.inputs = {0, kNoValue, kNoValue};
  TypeInfo x{DataType::kFloat32};
  EXPECT_NO_THROW(checkInputTypes(clip, kilnOpTypes("", "Clip", 1, 1000), {&x, nullptr, nullptr},
                                  {"x", "", ""}));
  Node identity;
  identity.name = "n";
  identity.opType = "Identity";
  identity.opset = 16;
  identity.inputs = {kNoValue};
  try {
    checkInputTypes(identity, kilnOpTypes("", "Identity", 1, 1000), {nullptr}, {""});
    FAIL() << "an omitted required input was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'n' (Identity): input 0 is required by Identity-16 "
                                         "but the node gives the empty name"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln::ir
