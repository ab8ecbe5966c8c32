#include "plugin_skeleton.h"

#include <sstream>

#include "plugin/plugin_node.h"

namespace kiln::cli {

namespace {

std::string describeValue(const ir::Graph& graph, int id) {
  if (id == ir::kNoValue) return "(omitted)";
  const ir::Value& v = graph.value(id);
  const std::string shape = v.type.shape ? ir::symShapeToString(*v.type.shape) : "?";
  return "'" + v.name + "' " + dataTypeName(v.type.dtype) + "[" + shape + "]";
}

// A C++ / Python identifier made of the name: other characters become '_'.
std::string identifier(const std::string& name, const std::string& fallback) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = fallback + out;
  return out;
}

std::string snakeCase(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (std::isupper(c) && i > 0 && !std::isupper(static_cast<unsigned char>(name[i - 1])))
      out += '_';
    out += static_cast<char>(std::tolower(c));
  }
  return identifier(out, "op_");
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

template <typename T, typename F>
std::string list(const std::vector<T>& values, F format, const char* open, const char* close) {
  std::string out = open;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + format(values[i]);
  return out + close;
}

std::string floatText(float f) {
  std::ostringstream s;
  s << f;
  std::string text = s.str();
  if (text.find_first_of(".e") == std::string::npos &&
      text.find_first_of("ni") == std::string::npos)
    text += ".0";
  return text;
}

// The C++ line that reads an attribute as a plugin field, the node's value as the default.
std::string cppField(const std::string& name, const ir::Attribute& a, const std::string& fields) {
  const std::string var = identifier(name, "attr_");
  const std::string q = quote(name);
  auto intText = [](int64_t v) { return std::to_string(v); };
  auto floatLiteral = [](float v) { return floatText(v) + "f"; };
  if (auto* v = std::get_if<int64_t>(&a))
    return "const int64_t " + var + " = " + fields + ".getInt(" + q + ", " + intText(*v) + ");";
  if (auto* v = std::get_if<float>(&a))
    return "const float " + var + " = " + fields + ".getFloat(" + q + ", " + floatLiteral(*v) +
           ");";
  if (auto* v = std::get_if<std::string>(&a))
    return "const std::string " + var + " = " + fields + ".getString(" + q + ", " + quote(*v) +
           ");";
  if (auto* v = std::get_if<std::vector<int64_t>>(&a))
    return "const std::vector<int64_t> " + var + " = " + fields + ".getInts(" + q + ", " +
           list(*v, intText, "{", "}") + ");";
  if (auto* v = std::get_if<std::vector<float>>(&a))
    return "const std::vector<float> " + var + " = " + fields + ".getFloats(" + q + ", " +
           list(*v, floatLiteral, "{", "}") + ");";
  if (std::holds_alternative<std::vector<std::string>>(a))
    return "const std::vector<std::string> " + var + " = " + fields + ".getStrings(" + q + ");";
  if (std::holds_alternative<Tensor>(a))
    return "const kiln::Tensor& " + var + " = " + fields + ".getTensor(" + q + ");";
  return "// attribute " + q + " is a " + std::string(ir::attributeKindName(a)) +
         ", which plugin fields cannot hold";
}

// The Python keyword argument for an attribute, the node's value as the default.
std::string pythonKeyword(const std::string& name, const ir::Attribute& a) {
  const std::string var = identifier(name, "attr_");
  auto intText = [](int64_t v) { return std::to_string(v); };
  if (auto* v = std::get_if<int64_t>(&a)) return var + "=" + intText(*v);
  if (auto* v = std::get_if<float>(&a)) return var + "=" + floatText(*v);
  if (auto* v = std::get_if<std::string>(&a)) return var + "=" + quote(*v);
  if (auto* v = std::get_if<std::vector<int64_t>>(&a))
    return var + "=" + list(*v, intText, "(", v->size() == 1 ? ",)" : ")");
  if (auto* v = std::get_if<std::vector<float>>(&a))
    return var + "=" + list(*v, floatText, "(", v->size() == 1 ? ",)" : ")");
  if (auto* v = std::get_if<std::vector<std::string>>(&a))
    return var + "=" + list(*v, quote, "(", v->size() == 1 ? ",)" : ")");
  return var + "=None";  // a tensor arrives as a numpy array; graphs are not passed
}

std::string ioComment(const ir::Graph& graph, const ir::Node& node, const char* prefix) {
  std::string out;
  for (size_t i = 0; i < node.numExplicitInputs(); ++i)
    out += std::string(prefix) + "input " + std::to_string(i) + ": " +
           describeValue(graph, node.inputs[i]) + "\n";
  for (size_t i = 0; i < node.outputs.size(); ++i)
    out += std::string(prefix) + "output " + std::to_string(i) + ": " +
           describeValue(graph, node.outputs[i]) + "\n";
  return out;
}

// The names of the attributes that are plugin fields (plugin_version selects the plugin instead).
std::vector<std::string> fieldNames(const ir::Node& node) {
  std::vector<std::string> names;
  for (const auto& [name, value] : node.attrs)
    if (name != plugin::kVersionAttribute) names.push_back(name);
  return names;
}

}  // namespace

namespace {

// The plugin's computation: its fields read with the node's values as defaults, the inputs' data.
void writeCppRunBody(std::ostringstream& s, const ir::Node& node, const std::string& fields,
                     const std::string& in) {
  for (const std::string& name : fieldNames(node))
    s << "    " << cppField(name, node.attrs.at(name), fields) << "\n";
  for (size_t i = 0; i < node.numExplicitInputs(); ++i)
    s << "    const float* in" << i << " = " << in << "[" << i << "] ? " << in << "[" << i
      << "]->data<float>() : nullptr;\n";
}

// The full path, for nodes of several outputs: an IPlugin with its fields as state, and its
// creator.
void writeFullCppPlugin(std::ostringstream& s, const ir::Node& node, const std::string& cls,
                        const std::string& version) {
  s << "class " << cls << " : public kiln::IPlugin {\n"
    << " public:\n"
    << "  explicit " << cls << "(kiln::PluginFields fields) : fields_(std::move(fields)) {}\n"
    << "  std::string getPluginName() const override { return " << quote(node.opType) << "; }\n"
    << "  std::string getPluginVersion() const override { return " << quote(version) << "; }\n"
    << "  std::string getPluginNamespace() const override { return " << quote(node.domain)
    << "; }\n"
    << "  int getNbOutputs() const override { return " << node.outputs.size() << "; }\n"
    << "  std::vector<kiln::DimExpr> getOutputDimensions(int output, const "
       "std::vector<kiln::ShapeExpr>& in) const override {\n"
    << "    return in.at(0);  // output `output`'s dims as expressions of the input dims\n"
    << "  }\n"
    << "  kiln::Status enqueue(const std::vector<const kiln::Tensor*>& in, const "
       "std::vector<kiln::Tensor*>& out,\n"
    << "                       void* workspace) override {\n";
  writeCppRunBody(s, node, "fields_", "in");
  for (size_t k = 0; k < node.outputs.size(); ++k)
    s << "    float* out" << k << " = out[" << k << "]->data<float>();\n";
  s << "    // compute every element of each output here\n"
    << "    return kiln::Status();\n"
    << "  }\n"
    << "  std::vector<uint8_t> serialize() const override { return fields_.serialize(); }\n"
    << "  std::unique_ptr<kiln::IPlugin> clone() const override { return std::make_unique<" << cls
    << ">(*this); }\n\n"
    << " private:\n"
    << "  kiln::PluginFields fields_;\n"
    << "};\n\n"
    << "class " << cls << "Creator : public kiln::IPluginCreator {\n"
    << " public:\n"
    << "  std::string getPluginName() const override { return " << quote(node.opType) << "; }\n"
    << "  std::string getPluginVersion() const override { return " << quote(version) << "; }\n"
    << "  std::string getPluginNamespace() const override { return " << quote(node.domain)
    << "; }\n"
    << "  std::unique_ptr<kiln::IPlugin> createPlugin(const std::string&, const "
       "kiln::PluginFields& fields) const override {\n"
    << "    return std::make_unique<" << cls << ">(fields);\n"
    << "  }\n"
    << "  std::unique_ptr<kiln::IPlugin> deserializePlugin(const std::string&, const void* data, "
       "size_t size) const override {\n"
    << "    return std::make_unique<" << cls << ">(kiln::PluginFields::deserialize(data, size));\n"
    << "  }\n"
    << "};\n"
    << "KILN_REGISTER_PLUGIN(" << cls << "Creator);\n";
}

}  // namespace

std::string cppPluginSkeleton(const ir::Graph& graph, const ir::Node& node) {
  const std::string cls = identifier(node.opType, "Op");
  const std::string requested = plugin::requestedVersion(node);
  const std::string version = requested.empty() ? "1" : requested;
  std::ostringstream s;
  s << "// " << snakeCase(node.opType) << "_plugin.cpp -> lib" << snakeCase(node.opType)
    << "_plugin.so, for " << node.label() << "\n"
    << ioComment(graph, node, "//   ") << "#include \"kiln/plugin.h\"\n\n";
  if (node.outputs.size() != 1) {
    writeFullCppPlugin(s, node, cls, version);
    return s.str();
  }
  s << "struct " << cls << " : kiln::SimplePlugin<" << cls << "> {\n"
    << "  kiln::Status run(const std::vector<const kiln::Tensor*>& in, kiln::Tensor& out) override "
       "{\n";
  writeCppRunBody(s, node, "fields()", "in");
  s << "    float* y = out.data<float>();\n"
    << "    // compute all out.numel() values of y here\n"
    << "    return kiln::Status();\n"
    << "  }\n"
    << "  // The output has input 0's dims unless outputDims(inputs) is overridden.\n"
    << "};\n"
    << "KILN_REGISTER_SIMPLE_PLUGIN(" << cls << ", " << quote(node.opType) << ", " << quote(version)
    << ", " << quote(node.domain) << ");\n";
  return s.str();
}

std::string pythonPluginSkeleton(const ir::Graph& graph, const ir::Node& node) {
  std::vector<std::string> params;
  for (size_t i = 0; i < node.numExplicitInputs(); ++i) {
    const int id = node.inputs[i];
    params.push_back(identifier(id == ir::kNoValue ? "" : graph.value(id).name, "input_"));
    if (params.back() == "input_") params.back() += std::to_string(i);
  }
  std::string args;
  for (const std::string& p : params) args += (args.empty() ? "" : ", ") + p;
  std::string keywords;
  for (const std::string& name : fieldNames(node))
    keywords += ", " + pythonKeyword(name, node.attrs.at(name));
  const std::string version = plugin::requestedVersion(node);
  std::ostringstream s;
  s << "# for " << node.label() << "\n"
    << ioComment(graph, node, "#   ") << "import numpy as np\nimport kiln\n\n"
    << "@kiln.custom_op(" << quote(node.domain) << ", " << quote(node.opType);
  if (node.outputs.size() != 1) s << ", num_outputs=" << node.outputs.size();
  if (!version.empty()) s << ", version=" << quote(version);
  s << ")  # outputs have input 0's shape and type unless shape= and dtypes= say otherwise\n"
    << "def " << snakeCase(node.opType) << "(" << args << (keywords.empty() ? "" : ", *")
    << keywords << "):\n"
    << "    # return "
    << (node.outputs.size() == 1 ? "the output as a numpy array" : "one numpy array per output")
    << " computed from " << (args.empty() ? "the attributes" : args) << "\n"
    << "    raise NotImplementedError(" << quote(node.opType + " is not written yet") << ")\n";
  return s.str();
}

}  // namespace kiln::cli
