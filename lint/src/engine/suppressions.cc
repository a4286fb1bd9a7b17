// Parsing suppression comments and matching them to findings.
#include "suppressions.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace nccl_migrate::lint {
namespace {

struct Suppression {
  int commentLine = 0;
  int appliesTo = 0;        // the line silenced; 0 = the whole file
  std::vector<std::string> codes;  // our codes only; empty = every rule (bare noqa / NOLINT)
  std::vector<bool> used;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Our rule codes among a list like "NM201, F401 legacy-class-check nccl-migrate-NM301".
std::vector<std::string> ourCodes(const std::string& list) {
  std::vector<std::string> codes;
  std::string token;
  auto flush = [&] {
    if (token.starts_with("nccl-migrate-")) token = token.substr(13);
    if (const Rule* rule = findRule(token)) codes.push_back(rule->info().code);
    token.clear();
  };
  for (char c : list) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') token += c;
    else flush();
  }
  flush();
  return codes;
}

// The code list after a marker: `marker: A, B` or `marker(A, B)`; npos-safe.
std::string listAfter(const std::string& text, size_t end, bool& hasList) {
  size_t i = end;
  while (i < text.size() && text[i] == ' ') ++i;
  hasList = false;
  if (i < text.size() && text[i] == ':') {
    hasList = true;
    return text.substr(i + 1);
  }
  if (i < text.size() && text[i] == '(') {
    hasList = true;
    size_t close = text.find(')', i);
    return text.substr(i + 1, close == std::string::npos ? std::string::npos : close - i - 1);
  }
  return "";
}

void addSuppression(std::vector<Suppression>& out, int commentLine, int appliesTo, const std::string& list, bool hasList) {
  Suppression s{commentLine, appliesTo, {}, {}};
  if (hasList) {
    s.codes = ourCodes(list);
    if (s.codes.empty()) return;  // another tool's codes only
  }
  s.used.assign(s.codes.size(), false);
  out.push_back(std::move(s));
}

// One marker in a comment: where it applies and which codes it names.
void addMarker(std::vector<Suppression>& out, const Comment& c, size_t markerEnd, int appliesTo) {
  bool hasList = false;
  std::string list = listAfter(c.text, markerEnd, hasList);
  addSuppression(out, c.line, appliesTo, list, hasList);
}

std::vector<Suppression> parse(const SourceModel& model) {
  std::vector<Suppression> out;
  for (const Comment& c : model.comments) {
    std::string text = lower(c.text);
    if (size_t at = text.find("nccl-migrate: noqa"); at != std::string::npos) {
      addMarker(out, c, at + 18, 0);
    } else if (size_t next = text.find("noqa-next-line"); next != std::string::npos) {
      addMarker(out, c, next + 14, c.line + 1);
    } else if (size_t noqa = text.find("noqa"); noqa != std::string::npos) {
      addMarker(out, c, noqa + 4, c.line);
    }
    // NOLINT markers are upper case by convention (clang-tidy reads them case-sensitively).
    if (size_t at = c.text.find("NOLINTNEXTLINE"); at != std::string::npos) {
      addMarker(out, c, at + 14, c.line + 1);
    } else if (size_t plain = c.text.find("NOLINT"); plain != std::string::npos &&
                                                    c.text.compare(plain, 11, "NOLINTBEGIN") != 0 &&
                                                    c.text.compare(plain, 9, "NOLINTEND") != 0) {
      addMarker(out, c, plain + 6, c.line);
    }
  }
  return out;
}

bool suppresses(Suppression& s, const Finding& f) {
  if (s.appliesTo != 0 && s.appliesTo != f.where.line) return false;
  if (s.codes.empty()) return true;
  for (size_t i = 0; i < s.codes.size(); ++i) {
    if (s.codes[i] == f.code) {
      s.used[i] = true;
      return true;
    }
  }
  return false;
}

}  // namespace

int applySuppressions(const SourceModel& model, const LintConfig& config, bool reportUnused,
                      std::vector<Finding>& findings) {
  std::vector<Suppression> suppressions = parse(model);
  if (suppressions.empty()) return 0;
  size_t before = findings.size();
  std::erase_if(findings, [&](const Finding& f) {
    bool hit = false;
    for (Suppression& s : suppressions) hit |= suppresses(s, f);  // every match counts as used
    return hit;
  });
  int removed = static_cast<int>(before - findings.size());
  if (!reportUnused) return removed;
  for (const Suppression& s : suppressions) {
    for (size_t i = 0; i < s.codes.size(); ++i) {
      const Rule* rule = findRule(s.codes[i]);
      if (s.used[i] || !rule || !ruleEnabled(config, rule->info().code, rule->info().slug, rule->info().enabledByDefault)) continue;
      if (rule->info().code == "NM001") continue;
      findings.push_back(Finding{model.path, {s.commentLine, 1}, "NM001",
                                 "unused suppression: " + s.codes[i] + " (" + rule->info().slug + ") reports nothing " +
                                     (s.appliesTo == 0 ? std::string("in this file") : "on line " + std::to_string(s.appliesTo)) +
                                     "; remove it",
                                 std::nullopt, {}});
    }
  }
  return removed;
}

}  // namespace nccl_migrate::lint
