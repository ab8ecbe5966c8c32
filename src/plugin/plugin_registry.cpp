// The process-wide plugin registry and loading plugin libraries with dlopen.
#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "kiln/plugin.h"

namespace kiln {

namespace {

std::string describeKey(const std::string& name, const std::string& version,
                        const std::string& ns) {
  return "plugin '" + name + "' (version '" + version + "', namespace '" + ns + "')";
}

// "10" > "9" > "1.2" > "1": numeric where both are numbers, else by length then text.
bool versionLess(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

}  // namespace

PluginRegistry& PluginRegistry::global() {
  static PluginRegistry* registry =
      new PluginRegistry;  // never destroyed: plugin libraries outlive exit order
  return *registry;
}

Status PluginRegistry::registerCreator(std::shared_ptr<IPluginCreator> creator) {
  if (!creator) return Status(ErrorCode::kInvalidArgument, "registerCreator: the creator is null");
  const std::string name = creator->getPluginName(), version = creator->getPluginVersion(),
                    ns = creator->getPluginNamespace();
  if (name.empty())
    return Status(ErrorCode::kInvalidArgument,
                  "registerCreator: a plugin creator has an empty name");
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& c : creators_) {
    if (c->getPluginName() == name && c->getPluginVersion() == version &&
        c->getPluginNamespace() == ns) {
      return Status(ErrorCode::kInvalidArgument,
                    describeKey(name, version, ns) + " is already registered");
    }
  }
  creators_.push_back(std::move(creator));
  return Status();
}

bool PluginRegistry::deregisterCreator(const std::string& name, const std::string& version,
                                       const std::string& ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(creators_.begin(), creators_.end(), [&](const auto& c) {
    return c->getPluginName() == name && c->getPluginVersion() == version &&
           c->getPluginNamespace() == ns;
  });
  if (it == creators_.end()) return false;
  creators_.erase(it);
  return true;
}

std::shared_ptr<IPluginCreator> PluginRegistry::getCreator(const std::string& name,
                                                           const std::string& version,
                                                           const std::string& ns) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<IPluginCreator> best;
  for (const auto& c : creators_) {
    if (c->getPluginName() != name || c->getPluginNamespace() != ns) continue;
    if (!version.empty()) {
      if (c->getPluginVersion() == version) return c;
    } else if (!best || versionLess(best->getPluginVersion(), c->getPluginVersion())) {
      best = c;
    }
  }
  return best;
}

bool PluginRegistry::hasPlugin(const std::string& name, const std::string& ns) const {
  return getCreator(name, "", ns) != nullptr;
}

std::vector<std::shared_ptr<IPluginCreator>> PluginRegistry::getAllCreators() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return creators_;
}

std::vector<std::string> PluginRegistry::getLoadedLibraries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return libraries_;
}

void PluginRegistry::addLoadedLibrary(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (std::find(libraries_.begin(), libraries_.end(), path) == libraries_.end())
    libraries_.push_back(path);
}

Status loadPluginLibrary(const std::string& path) {
  if (path.empty())
    return Status(ErrorCode::kInvalidArgument, "loadPluginLibrary: the path is empty");
  // dlopen searches LD_LIBRARY_PATH for a bare name; a path with a '/' is taken as is.
  std::error_code ec;
  const bool hasSlash = path.find('/') != std::string::npos;
  if (hasSlash && !std::filesystem::exists(path, ec)) {
    return Status(ErrorCode::kIoError,
                  path + ": cannot load the plugin library: the file does not exist");
  }
  std::string key =
      hasSlash ? std::filesystem::absolute(path, ec).lexically_normal().string() : path;
  for (const std::string& loaded : PluginRegistry::global().getLoadedLibraries())
    if (loaded == key) return Status();
  // RTLD_NODELETE: creators made by the library stay valid for the life of the process.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    const char* why = dlerror();
    return Status(ErrorCode::kIoError, path + ": cannot load the plugin library: " +
                                           (why ? why : "unknown dlopen error"));
  }
  PluginRegistry::global().addLoadedLibrary(key);
  return Status();
}

void reportPluginRegistrationFailure(const Status& status) {
  std::cerr << "kiln: plugin registration failed: " << status.message() << "\n";
}

}  // namespace kiln
