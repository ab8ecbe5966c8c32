#include "ir/ops/einsum_equation.h"

#include <algorithm>
#include <cctype>

#include "ir/node_attrs.h"

namespace kiln::ir {
namespace {

constexpr int kLetterLabels = 52;  // a-z then A-Z; ellipsis axes get the labels after them

struct Term {
  std::vector<int> letters;  // letter labels, with kEllipsis where "..." stands
  bool hasEllipsis = false;
};
constexpr int kEllipsis = -1;

Term parseTerm(const Node& node, const std::string& text) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (term.hasEllipsis || text.compare(i, 3, "...") != 0)
        failNode(node, "malformed ellipsis in einsum term '" + text + "'");
      term.hasEllipsis = true;
      term.letters.push_back(kEllipsis);
      i += 2;
    } else if (std::islower(static_cast<unsigned char>(c))) {
      term.letters.push_back(c - 'a');
    } else if (std::isupper(static_cast<unsigned char>(c))) {
      term.letters.push_back(26 + (c - 'A'));
    } else {
      failNode(node, std::string("invalid character '") + c + "' in einsum equation");
    }
  }
  return term;
}

/// Replaces the ellipsis by `ellipsisRank` axes aligned to the right of the shared ellipsis labels.
std::vector<int> expand(const Term& term, int64_t ellipsisRank, int64_t maxEllipsisRank) {
  std::vector<int> labels;
  for (int l : term.letters) {
    if (l != kEllipsis) {
      labels.push_back(l);
      continue;
    }
    for (int64_t e = maxEllipsisRank - ellipsisRank; e < maxEllipsisRank; ++e) {
      labels.push_back(kLetterLabels + static_cast<int>(e));
    }
  }
  return labels;
}

}  // namespace

EinsumEquation parseEinsum(const Node& node, const std::string& equation,
                           const std::vector<int64_t>& inputRanks) {
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<Term> inputs;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    inputs.push_back(parseTerm(
        node, lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (inputs.size() != inputRanks.size()) {
    failNode(node, "einsum equation has " + std::to_string(inputs.size()) + " input terms for " +
                       std::to_string(inputRanks.size()) + " inputs");
  }
  int64_t maxEllipsisRank = 0;
  std::vector<int64_t> ellipsisRanks;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto letters =
        static_cast<int64_t>(inputs[i].letters.size()) - (inputs[i].hasEllipsis ? 1 : 0);
    const int64_t ellipsisRank = inputRanks[i] - letters;
    if (ellipsisRank < 0 || (!inputs[i].hasEllipsis && ellipsisRank != 0)) {
      failNode(node, "einsum term " + std::to_string(i) + " does not match its input of rank " +
                         std::to_string(inputRanks[i]));
    }
    ellipsisRanks.push_back(ellipsisRank);
    maxEllipsisRank = std::max(maxEllipsisRank, ellipsisRank);
  }
  EinsumEquation eq;
  eq.labelCount = kLetterLabels + static_cast<int>(maxEllipsisRank);
  std::vector<int> counts(static_cast<size_t>(kLetterLabels), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    eq.inputLabels.push_back(expand(inputs[i], ellipsisRanks[i], maxEllipsisRank));
    for (int l : inputs[i].letters) {
      if (l != kEllipsis) ++counts[static_cast<size_t>(l)];
    }
  }
  if (arrow == std::string::npos) {
    // Implicit output: the ellipsis axes, then the letters used once, in alphabetical order.
    for (int64_t e = 0; e < maxEllipsisRank; ++e)
      eq.outputLabels.push_back(kLetterLabels + static_cast<int>(e));
    std::vector<int> once;
    for (int l = 0; l < kLetterLabels; ++l) {
      if (counts[static_cast<size_t>(l)] == 1) once.push_back(l);
    }
    // Alphabetical order puts 'A'-'Z' (labels 26-51) before 'a'-'z' (labels 0-25), as in numpy.
    std::stable_partition(once.begin(), once.end(), [](int l) { return l >= 26; });
    eq.outputLabels.insert(eq.outputLabels.end(), once.begin(), once.end());
  } else {
    const Term out = parseTerm(node, equation.substr(arrow + 2));
    if (!out.hasEllipsis && maxEllipsisRank > 0) {
      // numpy sums ellipsis axes that the output omits; ONNX models always keep them.
      failNode(node, "einsum output must keep the ellipsis of its inputs");
    }
    for (int l : out.letters) {
      if (l != kEllipsis && counts[static_cast<size_t>(l)] == 0)
        failNode(node, "einsum output label is not in any input");
    }
    eq.outputLabels = expand(out, maxEllipsisRank, maxEllipsisRank);
  }
  std::vector<int> sortedOut = eq.outputLabels;
  std::sort(sortedOut.begin(), sortedOut.end());
  if (std::adjacent_find(sortedOut.begin(), sortedOut.end()) != sortedOut.end()) {
    failNode(node, "einsum output repeats a label");
  }
  return eq;
}

}  // namespace kiln::ir
