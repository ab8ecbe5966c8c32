#include "plugin/plugin_node.h"

#include <algorithm>

#include "ir/node_attrs.h"
#include "ir/op_schema.h"
#include "kiln/error.h"

namespace kiln::plugin {

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// An attribute as a plugin field; graphs cannot be fields.
PluginFieldValue fieldFromAttribute(const ir::Node& node, const std::string& name,
                                    const ir::Attribute& a) {
  if (const auto* v = std::get_if<int64_t>(&a)) return *v;
  if (const auto* v = std::get_if<float>(&a)) return *v;
  if (const auto* v = std::get_if<std::string>(&a)) return *v;
  if (const auto* v = std::get_if<Tensor>(&a)) return *v;
  if (const auto* v = std::get_if<std::vector<int64_t>>(&a)) return *v;
  if (const auto* v = std::get_if<std::vector<float>>(&a)) return *v;
  if (const auto* v = std::get_if<std::vector<std::string>>(&a)) return *v;
  ir::failNode(
      node,
      "attribute '" + name + "' has type " + ir::attributeKindName(a) +
          ", which cannot be a plugin field (int, float, string, ints, floats, strings or tensor)",
      ErrorCode::kUnsupportedNode);
}

}  // namespace

std::string requestedVersion(const ir::Node& node) {
  auto it = node.attrs.find(kVersionAttribute);
  if (it == node.attrs.end()) return "";
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return std::to_string(*i);
  ir::failNode(node, std::string("attribute '") + kVersionAttribute +
                         "' must be a string or an int, given " +
                         ir::attributeKindName(it->second));
}

std::string pluginLabel(const IPlugin& plugin) {
  return "plugin " + quoted(plugin.getPluginName()) + " (version " +
         quoted(plugin.getPluginVersion()) + ", namespace " + quoted(plugin.getPluginNamespace()) +
         ")";
}

std::string searchedLibrariesText() {
  std::vector<std::string> libs = PluginRegistry::global().getLoadedLibraries();
  if (libs.empty())
    return "none loaded (load one with `--plugins LIB.so` or kiln::loadPluginLibrary)";
  std::string s;
  for (const std::string& l : libs) s += (s.empty() ? "" : ", ") + l;
  return s;
}

std::shared_ptr<const IPlugin> createPlugin(const IPluginCreator& creator,
                                            const std::string& nodeName,
                                            const std::string& nodeLabel,
                                            const PluginFields& given) {
  const std::string who = nodeLabel + ": plugin " + quoted(creator.getPluginName());
  const std::vector<PluginFieldSpec> specs = creator.getFieldNames();
  PluginFields fields;
  // Named references rather than a structured binding: clang 14 (the fuzz build) cannot capture
  // a binding in a lambda.
  for (const auto& field : given.all()) {
    const std::string& name = field.first;
    const auto& value = field.second;
    const PluginFieldType type = given.type(name);
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [&](const PluginFieldSpec& s) { return s.name == name; });
    if (specs.empty()) {
      fields.set(name, value);
      continue;
    }
    if (spec == specs.end()) {
      std::string known;
      for (const auto& s : specs)
        known += (known.empty() ? "" : ", ") + s.name + " (" + pluginFieldTypeName(s.type) + ")";
      throw Error(ErrorCode::kInvalidModel,
                  who + " has no field '" + name + "' (its fields: " + known + ")");
    }
    if (spec->type == type) {
      fields.set(name, value);
    } else if (spec->type == PluginFieldType::kFLOAT && type == PluginFieldType::kINT) {
      fields.set(name, given.getFloat(name));
    } else if (spec->type == PluginFieldType::kFLOATS && type == PluginFieldType::kINTS) {
      fields.set(name, given.getFloats(name));
    } else {
      throw Error(ErrorCode::kInvalidModel, who + " field '" + name + "' expects type " +
                                                pluginFieldTypeName(spec->type) + ", given " +
                                                pluginFieldTypeName(type));
    }
  }
  for (const PluginFieldSpec& s : specs) {
    if (s.required && !given.has(s.name)) {
      throw Error(ErrorCode::kInvalidModel,
                  who + " needs field '" + s.name + "' (" + pluginFieldTypeName(s.type) + ")");
    }
  }
  std::unique_ptr<IPlugin> made;
  try {
    made = creator.createPlugin(nodeName, fields);
  } catch (const Error& e) {
    throw Error(e.code() == ErrorCode::kRuntimeError ? ErrorCode::kInvalidModel : e.code(),
                who + ": " + e.what());
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInvalidModel, who + ": creating the plugin failed: " + e.what());
  }
  if (!made) throw Error(ErrorCode::kInvalidModel, who + ": the creator returned no plugin");
  if (made->getPluginName() != creator.getPluginName() ||
      made->getPluginVersion() != creator.getPluginVersion() ||
      made->getPluginNamespace() != creator.getPluginNamespace()) {
    throw Error(ErrorCode::kInvalidModel,
                who + ": the creator made " + pluginLabel(*made) +
                    ", whose identity differs from its creator's (a plan could not re-create it)");
  }
  return std::shared_ptr<const IPlugin>(std::move(made));
}

void resolvePluginNode(ir::Node& node) {
  const bool simple = node.opType == "Plugin" && node.domain.empty() &&
                      !ir::OpSchemaRegistry::global().findRegistered("", "Plugin", node.opset);
  if (!simple &&
      ir::OpSchemaRegistry::global().findRegistered(node.domain, node.opType, node.opset))
    return;
  std::string info;
  if (simple) {  // becomes a node of the plugin itself, so that it is found and reported as any
                 // other
    const std::string name = ir::attrString(node, "name");
    if (name.empty()) ir::failNode(node, "attribute 'name' (the plugin to run) is empty");
    info = ir::attrString(node, "info", "{}");
    node.opType = name;
    node.domain = ir::attrString(node, "namespace", "");
  }
  auto creator =
      PluginRegistry::global().getCreator(node.opType, requestedVersion(node), node.domain);
  if (!creator) return;  // reported with every other unsupported node (describeMissingPlugin)
  PluginFields fields;
  if (simple) {
    try {
      fields = PluginFields::fromJson(info);
    } catch (const Error& e) {
      ir::failNode(node, std::string("attribute 'info': ") + e.what());
    }
  } else {
    for (const auto& [name, attr] : node.attrs)
      if (name != kVersionAttribute) fields.set(name, fieldFromAttribute(node, name, attr));
  }
  node.plugin = createPlugin(*creator, node.name, node.label(), fields);
}

std::string describeMissingPlugin(const ir::Node& node) {
  if (node.plugin ||
      ir::OpSchemaRegistry::global().findRegistered(node.domain, node.opType, node.opset))
    return "";
  std::string version;
  try {
    version = requestedVersion(node);
  } catch (const Error&) {
  }
  std::string s = "no plugin " + quoted(node.opType) + " (version " +
                  (version.empty() ? "any" : quoted(version)) + ", namespace " +
                  quoted(node.domain) + ") is registered";
  std::string others;
  for (const auto& c : PluginRegistry::global().getAllCreators())
    if (c->getPluginName() == node.opType && c->getPluginNamespace() == node.domain)
      others += (others.empty() ? "" : ", ") + quoted(c->getPluginVersion());
  if (!others.empty()) s += " (registered versions: " + others + ")";
  return s + "; plugin libraries searched: " + searchedLibrariesText();
}

}  // namespace kiln::plugin
