// Parsing suppression comments and matching them to findings.
#include "suppressions.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

namespace nccl_migrate::lint {
namespace {

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

// The code list after a marker: `marker: A, B` or `marker(A, B)`; nullopt for a bare marker.
std::optional<std::string> listAfter(const std::string& text, size_t end) {
  size_t i = end;
  while (i < text.size() && text[i] == ' ') ++i;
  if (i < text.size() && text[i] == ':') return text.substr(i + 1);
  if (i < text.size() && text[i] == '(') {
    size_t close = text.find(')', i);
    return text.substr(i + 1, close == std::string::npos ? std::string::npos : close - i - 1);
  }
  return std::nullopt;
}

// One marker in a comment: where it applies and which codes it names (all, for a bare marker).
// A marker that names only other tools' codes is not ours.
void addMarker(std::vector<Suppression>& out, const Comment& c, size_t markerEnd, int appliesTo) {
  Suppression s{c.line, appliesTo, {}, {}};
  if (std::optional<std::string> list = listAfter(c.text, markerEnd)) {
    s.codes = ourCodes(*list);
    if (s.codes.empty()) return;
  }
  s.used.assign(s.codes.size(), false);
  out.push_back(std::move(s));
}

}  // namespace

Suppressions::Suppressions(const SourceModel& model) : path_(model.path) {
  for (const Comment& c : model.comments) {
    std::string text = lower(c.text);
    if (size_t at = text.find("nccl-migrate: noqa"); at != std::string::npos) {
      addMarker(list_, c, at + 18, 0);
    } else if (size_t next = text.find("noqa-next-line"); next != std::string::npos) {
      addMarker(list_, c, next + 14, c.line + 1);
    } else if (size_t noqa = text.find("noqa"); noqa != std::string::npos) {
      addMarker(list_, c, noqa + 4, c.line);
    }
    // NOLINT markers are upper case by convention (clang-tidy reads them case-sensitively).
    if (size_t at = c.text.find("NOLINTNEXTLINE"); at != std::string::npos) {
      addMarker(list_, c, at + 14, c.line + 1);
    } else if (size_t plain = c.text.find("NOLINT"); plain != std::string::npos &&
                                                    c.text.compare(plain, 11, "NOLINTBEGIN") != 0 &&
                                                    c.text.compare(plain, 9, "NOLINTEND") != 0) {
      addMarker(list_, c, plain + 6, c.line);
    }
  }
}

bool Suppressions::suppresses(Suppression& s, const Finding& f) {
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

int Suppressions::removeSuppressed(std::vector<Finding>& findings) {
  size_t before = findings.size();
  std::erase_if(findings, [&](const Finding& f) {
    bool hit = false;
    for (Suppression& s : list_) hit |= suppresses(s, f);  // every match counts as used
    return hit;
  });
  return static_cast<int>(before - findings.size());
}

std::vector<Finding> Suppressions::unused(const LintConfig& config) const {
  std::vector<Finding> out;
  for (const Suppression& s : list_) {
    for (size_t i = 0; i < s.codes.size(); ++i) {
      const Rule* rule = findRule(s.codes[i]);
      if (s.used[i] || !rule || !ruleEnabled(config, rule->info().code, rule->info().slug, rule->info().enabledByDefault)) continue;
      if (rule->info().code == "NM001") continue;
      out.push_back(Finding{path_, {s.commentLine, 1}, "NM001",
                            "unused suppression: " + s.codes[i] + " (" + rule->info().slug + ") reports nothing " +
                                (s.appliesTo == 0 ? std::string("in this file") : "on line " + std::to_string(s.appliesTo)) +
                                "; remove it",
                            std::nullopt, {}});
    }
  }
  return out;
}

}  // namespace nccl_migrate::lint
