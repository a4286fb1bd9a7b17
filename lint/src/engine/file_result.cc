// Encoding of FileResult: little-endian fixed-width integers and length-prefixed strings, read
// back with every length checked, so a truncated message decodes to nothing instead of garbage.
#include "file_result.h"

#include <cstdint>
#include <cstring>

namespace nccl_migrate::lint {
namespace {

class Writer {
 public:
  void u64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void str(const std::string& s) {
    u64(s.size());
    out_ += s;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool u64(uint64_t& v) {
    if (in_.size() < sizeof v) return false;
    std::memcpy(&v, in_.data(), sizeof v);
    in_.remove_prefix(sizeof v);
    return true;
  }
  bool i64(int64_t& v) {
    uint64_t u;
    if (!u64(u)) return false;
    v = static_cast<int64_t>(u);
    return true;
  }
  bool integer(int& v) {
    int64_t w;
    if (!i64(w)) return false;
    v = static_cast<int>(w);
    return true;
  }
  bool size(size_t& v) {
    uint64_t w;
    if (!u64(w)) return false;
    v = static_cast<size_t>(w);
    return true;
  }
  bool str(std::string& s) {
    uint64_t n;
    if (!u64(n) || n > in_.size()) return false;
    s.assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  // A count of items that each take at least one integer: more than the bytes left is corrupt.
  bool count(uint64_t& n) { return u64(n) && n <= in_.size() / sizeof(uint64_t); }
  bool atEnd() const { return in_.empty(); }

 private:
  std::string_view in_;
};

void writeFinding(Writer& w, const Finding& f) {
  w.str(f.path);
  w.i64(f.where.line);
  w.i64(f.where.column);
  w.i64(f.where.cell);
  w.str(f.code);
  w.str(f.message);
  w.str(f.fingerprint);
  w.u64(f.fix.has_value());
  if (!f.fix) return;
  w.str(f.fix->title);
  w.i64(static_cast<int64_t>(f.fix->safety));
  w.u64(f.fix->edits.size());
  for (const Edit& e : f.fix->edits) {
    w.u64(e.range.begin);
    w.u64(e.range.end);
    w.str(e.replacement);
  }
}

bool readFinding(Reader& r, Finding& f) {
  uint64_t hasFix = 0;
  if (!(r.str(f.path) && r.integer(f.where.line) && r.integer(f.where.column) && r.integer(f.where.cell) &&
        r.str(f.code) && r.str(f.message) && r.str(f.fingerprint) && r.u64(hasFix))) {
    return false;
  }
  if (!hasFix) return true;
  Fix fix;
  int safety = 0;
  uint64_t edits = 0;
  if (!(r.str(fix.title) && r.integer(safety) && r.count(edits))) return false;
  fix.safety = static_cast<FixSafety>(safety);
  fix.edits.resize(edits);
  for (Edit& e : fix.edits) {
    if (!(r.size(e.range.begin) && r.size(e.range.end) && r.str(e.replacement))) return false;
  }
  f.fix = std::move(fix);
  return true;
}

}  // namespace

std::string encodeFileResult(const FileResult& result) {
  Writer w;
  w.u64(result.scanned);
  w.u64(result.parsed);
  w.i64(result.suppressed);
  w.u64(result.warnings.size());
  for (const std::string& warning : result.warnings) w.str(warning);
  w.u64(result.findings.size());
  for (const Finding& f : result.findings) writeFinding(w, f);
  return w.take();
}

std::optional<FileResult> decodeFileResult(std::string_view bytes) {
  Reader r(bytes);
  FileResult result;
  uint64_t scanned = 0, parsed = 0, warnings = 0, findings = 0;
  if (!(r.u64(scanned) && r.u64(parsed) && r.integer(result.suppressed) && r.count(warnings))) return std::nullopt;
  result.scanned = scanned != 0;
  result.parsed = parsed != 0;
  result.warnings.resize(warnings);
  for (std::string& warning : result.warnings) {
    if (!r.str(warning)) return std::nullopt;
  }
  if (!r.count(findings)) return std::nullopt;
  result.findings.resize(findings);
  for (Finding& f : result.findings) {
    if (!readFinding(r, f)) return std::nullopt;
  }
  if (!r.atEnd()) return std::nullopt;
  return result;
}

}  // namespace nccl_migrate::lint
