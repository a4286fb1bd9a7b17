// SARIF 2.1.0, as GitHub code scanning reads it: rules in tool.driver.rules with stable ids,
// relative artifact URIs under %SRCROOT%, and partialFingerprints for de-duplication.
#include <filesystem>
#include <ostream>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::lint {
namespace {

std::string artifactUri(const std::string& path) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.is_absolute()) {
    std::filesystem::path rel = std::filesystem::relative(p, std::filesystem::current_path(ec), ec);
    if (!ec && !rel.empty() && !rel.string().starts_with("..")) p = rel;
  }
  std::string uri = p.lexically_normal().generic_string();
  if (uri.starts_with("./")) uri = uri.substr(2);
  return uri;
}

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
          json.attributeObject("%SRCROOT%", [&] {
            std::error_code ec;
            json.attribute("uri", "file://" + std::filesystem::current_path(ec).generic_string() + "/");
          });
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
                      json.attribute("uri", artifactUri(f.path));
                      json.attribute("uriBaseId", "%SRCROOT%");
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
