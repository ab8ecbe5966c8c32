#include "saved_outputs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/npy.h"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void badManifest(const fs::path& manifest, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, manifest.string() + ": " + what);
}

// The entry's file, checked to be a plain name inside the folder.
fs::path entryFile(const fs::path& dir, const fs::path& manifest, const nlohmann::json& entry) {
  if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
      !entry.contains("file") || !entry["file"].is_string()) {
    badManifest(manifest, "each entry needs a string 'name' and 'file', got " + entry.dump());
  }
  const std::string file = entry["file"];
  if (file.empty() || fs::path(file).filename() != fs::path(file) || file == "." || file == "..") {
    badManifest(manifest, "file '" + file + "' of '" + entry["name"].get<std::string>() +
                              "' is not a file name in the folder");
  }
  return dir / file;
}

SavedOutputs readManifest(const fs::path& dir, const fs::path& manifest) {
  nlohmann::json json;
  try {
    std::ifstream in(manifest);
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    badManifest(manifest, std::string("not valid JSON: ") + e.what());
  }
  if (!json.is_object() || !json.contains("outputs") || !json["outputs"].is_array()) {
    badManifest(manifest, "expected an object with an 'outputs' list");
  }
  SavedOutputs saved;
  saved.engine = json.contains("engine") && json["engine"].is_string()
                     ? json["engine"].get<std::string>()
                     : "saved outputs";
  for (const auto& entry : json["outputs"]) {
    const fs::path file = entryFile(dir, manifest, entry);
    const std::string name = entry["name"];
    if (file.extension() != ".npy") {
      saved.skipped.push_back(name + " (" + file.filename().string() +
                              ": only .npy files are compared)");
      continue;
    }
    saved.outputs.emplace_back(name, readNpy(file.string()));
  }
  if (json.contains("inputs") && json["inputs"].is_array()) {
    for (const auto& entry : json["inputs"]) {
      saved.inputFiles.push_back(entry["name"].get<std::string>() + "=" +
                                 entryFile(dir, manifest, entry).string());
    }
  }
  return saved;
}

}  // namespace

SavedOutputs readSavedOutputs(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(ErrorCode::kInvalidArgument, dir + ": not a folder of saved outputs");
  const fs::path manifest = fs::path(dir) / "outputs.json";
  if (fs::exists(manifest, ec)) return readManifest(dir, manifest);
  SavedOutputs saved;
  saved.engine = "saved outputs";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".npy")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files)
    saved.outputs.emplace_back(file.stem().string(), readNpy(file.string()));
  if (saved.outputs.empty())
    throw Error(ErrorCode::kInvalidArgument, dir + ": holds no outputs.json and no .npy files");
  return saved;
}

}  // namespace kiln::cli
