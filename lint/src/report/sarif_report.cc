// SARIF 2.1.0, as GitHub code scanning reads it: one run per invocation, rules in
// tool.driver.rules with stable ids, descriptions, help and a help URI, artifact URIs relative to
// %SRCROOT% (the working directory), and partialFingerprints for de-duplication across commits.
#include <cctype>
#include <filesystem>
#include <ostream>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::lint {
namespace {

// RFC 3986: everything but unreserved characters and the path separator is percent-encoded, so
// a file named with spaces or non-ASCII letters still makes a valid URI.
std::string percentEncoded(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::filesystem::path workingDirectory() {
  std::error_code ec;
  return std::filesystem::current_path(ec);
}

// Code scanning matches results to files by paths relative to the checkout: a file under the
// working directory (the run's %SRCROOT%) is named relative to it; one outside it keeps an
// absolute file URI and no base.
struct ArtifactUri {
  std::string uri;
  bool underSourceRoot;
};

ArtifactUri artifactUri(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec).lexically_normal();
  fs::path relative = absolute.lexically_relative(workingDirectory());
  if (!relative.empty() && *relative.begin() != "..") return {percentEncoded(relative.generic_string()), true};
  return {"file://" + percentEncoded(absolute.generic_string()), false};
}

std::string sourceRootUri() {
  std::string dir = workingDirectory().generic_string();
  if (!dir.ends_with('/')) dir += '/';
  return "file://" + percentEncoded(dir);
}

std::string helpUri(const RuleInfo& info) { return std::string(NCCL_MIGRATE_RULE_DOCS_URL) + info.code + ".md"; }

int ruleIndex(const std::string& code) {
  const auto& rules = allRules();
  for (size_t i = 0; i < rules.size(); ++i)
    if (rules[i]->info().code == code) return static_cast<int>(i);
  return -1;
}

}  // namespace

void writeSarif(const LintReport& report, const std::string& toolVersion, std::ostream& out) {
  std::string buffer;
  llvm::raw_string_ostream stream(buffer);
  llvm::json::OStream json(stream, 2);
  json.object([&] {
    json.attribute("$schema", "https://json.schemastore.org/sarif-2.1.0.json");
    json.attribute("version", "2.1.0");
    json.attributeArray("runs", [&] {
      json.object([&] {
        json.attributeObject("tool", [&] {
          json.attributeObject("driver", [&] {
            json.attribute("name", "nccl-migrate");
            json.attribute("version", toolVersion);
            json.attribute("semanticVersion", toolVersion);
            json.attributeArray("rules", [&] {
              for (const Rule* rule : allRules()) {
                const RuleInfo& info = rule->info();
                json.object([&] {
                  json.attribute("id", info.code);
                  json.attribute("name", info.slug);
                  json.attributeObject("shortDescription", [&] { json.attribute("text", info.summary); });
                  json.attributeObject("fullDescription", [&] { json.attribute("text", info.rationale); });
                  json.attribute("helpUri", helpUri(info));
                  json.attributeObject("help", [&] {
                    json.attribute("text", info.fix);
                    json.attribute("markdown", ruleMarkdown(*rule));
                  });
                  json.attributeObject("defaultConfiguration", [&] {
                    json.attribute("level", "warning");
                    json.attribute("enabled", info.enabledByDefault);
                  });
                });
              }
            });
          });
        });
        json.attributeObject("originalUriBaseIds", [&] {
          json.attributeObject("%SRCROOT%", [&] { json.attribute("uri", sourceRootUri()); });
        });
        json.attributeArray("results", [&] {
          for (const Finding& f : report.findings) {
            json.object([&] {
              json.attribute("ruleId", f.code);
              if (int index = ruleIndex(f.code); index >= 0) json.attribute("ruleIndex", index);
              json.attribute("level", "warning");
              json.attributeObject("message", [&] { json.attribute("text", f.message); });
              json.attributeArray("locations", [&] {
                json.object([&] {
                  json.attributeObject("physicalLocation", [&] {
                    json.attributeObject("artifactLocation", [&] {
                      ArtifactUri artifact = artifactUri(f.path);
                      json.attribute("uri", artifact.uri);
                      if (artifact.underSourceRoot) json.attribute("uriBaseId", "%SRCROOT%");
                    });
                    json.attributeObject("region", [&] {
                      json.attribute("startLine", f.where.line);
                      json.attribute("startColumn", std::max(1, f.where.column));
                    });
                  });
                });
              });
              json.attributeObject("partialFingerprints", [&] { json.attribute("nccl-migrate/v1", f.fingerprint); });
            });
          }
        });
      });
    });
  });
  stream.flush();
  out << buffer << '\n';
}

}  // namespace nccl_migrate::lint
