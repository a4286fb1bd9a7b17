// C/C++/CUDA frontend, tier 2: Clang's AST with the project's compile commands (`-p DIR`) or
// flags after `--`. Matchers compare canonical types, so typedefs, `using` aliases, namespace
// aliases and templates resolve to the class they name. torch's headers may be missing: a
// forced-include stub declares the few torch names we match, and fatal errors (missing includes)
// are demoted so Clang keeps going. CUDA files parse host-side without the CUDA SDK. What it finds
// in a preprocessor branch torch 2.15 never compiles is dropped, as the lexer drops the branch.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <clang/AST/ASTContext.h>
#include <clang/ASTMatchers/ASTMatchFinder.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Lex/Lexer.h>
#include <clang/Tooling/ArgumentsAdjusters.h>
#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/JSONCompilationDatabase.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/Path.h>

#include "cpp/clang_resource_dir.h"
#include "cpp/cpp_module.h"
#include "cpp/cpp_tokens.h"
#include "cpp/torch_version_branches.h"

namespace nccl_migrate::lint {
namespace {
using namespace clang::ast_matchers;

// Declares torch's classes only where the real headers are not on the include path, so with
// real headers the AST is torch's own.
constexpr const char* kTorchStub = R"(
#pragma once
#if !__has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>)
namespace c10 {
template <class T> class intrusive_ptr {
 public:
  T* get() const; T* operator->() const; explicit operator bool() const;
};
template <class T, class U> intrusive_ptr<T> dynamic_intrusive_pointer_cast(const intrusive_ptr<U>&);
template <class T, class U> intrusive_ptr<T> static_intrusive_pointer_cast(const intrusive_ptr<U>&);
}
namespace c10d {
class Backend { public: virtual ~Backend(); };
class ProcessGroup { public: virtual ~ProcessGroup(); };
class ProcessGroupNCCL : public Backend { public: class Options; };
namespace nccl2 { class ProcessGroupNCCL : public ::c10d::Backend {}; }
}
#endif
)";

// Host-side CUDA without the SDK: the attributes and launch hook Clang needs for `<<<>>>`.
constexpr const char* kCudaStub = R"(
#pragma once
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#include <__clang_cuda_builtin_vars.h>
struct dim3 { unsigned x, y, z; dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {} };
typedef struct CUstream_st* cudaStream_t;
extern "C" int __cudaPushCallConfiguration(dim3, dim3, unsigned long = 0, cudaStream_t = 0);
)";

// Without torch's version header, torch 2.15's version macros, so the branches parsed are those
// torch 2.15 compiles; a build's own -D or torch's header keeps its values.
std::string torchStub() {
  std::string stub = kTorchStub;
  stub += "#if !__has_include(<torch/headeronly/version.h>) && !__has_include(<torch/version.h>)\n";
  for (const TorchVersionMacro& m : torchVersionMacros())
    stub += std::string("#ifndef ") + m.name + "\n#define " + m.name + " " + m.definition + "\n#endif\n";
  stub += "#endif\n";
  return stub;
}

constexpr const char* kStubPath = "/nccl-migrate-stubs/torch_stub.h";
constexpr const char* kCudaStubPath = "/nccl-migrate-stubs/cuda_stub.h";

const auto kLegacy = cxxRecordDecl(hasName("::c10d::ProcessGroupNCCL"));

class Collector : public MatchFinder::MatchCallback {
 public:
  Collector(SourceModel& model, std::vector<Range> notCompiled) : model_(model), notCompiled_(std::move(notCompiled)) {}

  void run(const MatchFinder::MatchResult& result) override {
    const clang::SourceManager& sm = *result.SourceManager;
    const clang::LangOptions& lang = result.Context->getLangOpts();
    if (const auto* cast = result.Nodes.getNodeAs<clang::ExplicitCastExpr>("cast")) {
      record(sm, cast->getBeginLoc(), kindOf(cast), asWritten(cast, sm, lang));
    } else if (const auto* down = result.Nodes.getNodeAs<clang::ExplicitCastExpr>("downcast")) {
      const clang::CXXRecordDecl* target = down->getTypeAsWritten()->getPointeeCXXRecordDecl();
      if (!target) target = down->getTypeAsWritten()->getAsCXXRecordDecl();
      record(sm, down->getBeginLoc(), kindOf(down), asWritten(down, sm, lang),
             target ? target->getQualifiedNameAsString() : down->getTypeAsWritten().getAsString());
    } else if (const auto* call = result.Nodes.getNodeAs<clang::CallExpr>("pointerCast")) {
      const auto* fn = call->getDirectCallee();
      std::string name = fn ? fn->getNameAsString() : "pointer cast";
      auto kind = name.find("dynamic") != std::string::npos ? TypeCheck::Kind::CheckedCast : TypeCheck::Kind::UncheckedCast;
      record(sm, call->getBeginLoc(), kind, name + "<c10d::ProcessGroupNCCL>");
    }
  }

 private:
  static TypeCheck::Kind kindOf(const clang::ExplicitCastExpr* cast) {
    return llvm::isa<clang::CXXDynamicCastExpr>(cast) ? TypeCheck::Kind::CheckedCast : TypeCheck::Kind::UncheckedCast;
  }

  // A cast written over several lines, on one: a message's first line holds the whole message.
  static std::string oneLine(const std::string& text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      char c = text[i];
      bool continuation = c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r');
      bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || continuation;
      if (!space) out += c;
      else if (!out.empty() && out.back() != ' ') out += ' ';
    }
    return out;
  }

  // The cast as the user wrote it ("static_cast<ProcessGroupNico *>(&p)"), clipped; inside a macro,
  // the cast and its type as written.
  static std::string asWritten(const clang::ExplicitCastExpr* cast, const clang::SourceManager& sm,
                               const clang::LangOptions& lang) {
    constexpr size_t kMax = 160;
    clang::SourceRange range = cast->getSourceRange();
    if (range.getBegin().isFileID() && range.getEnd().isFileID()) {
      std::string text = oneLine(clang::Lexer::getSourceText(clang::CharSourceRange::getTokenRange(range), sm, lang).str());
      if (!text.empty()) return text.size() > kMax ? text.substr(0, kMax) + "..." : text;
    }
    const auto* named = llvm::dyn_cast<clang::CXXNamedCastExpr>(cast);
    return std::string(named ? named->getCastName() : "cast") + "<" + cast->getTypeAsWritten().getAsString() + ">";
  }

  void record(const clang::SourceManager& sm, clang::SourceLocation loc, TypeCheck::Kind kind, std::string spelling,
              std::string downcastTo = "") {
    loc = sm.getFileLoc(loc);
    if (!sm.isWrittenInMainFile(loc)) return;  // headers are linted as files of their own
    // A build against another torch parses branches torch 2.15 never compiles.
    size_t offset = sm.getFileOffset(loc);
    for (const Range& r : notCompiled_)
      if (offset >= r.begin && offset < r.end) return;
    clang::PresumedLoc p = sm.getPresumedLoc(loc);
    if (p.isInvalid()) return;
    TypeCheck check{kind, "c10d::ProcessGroupNCCL", std::move(spelling),
                    {static_cast<int>(p.getLine()), static_cast<int>(p.getColumn())}, std::move(downcastTo)};
    withLexerRanges(check);
    model_.typeChecks.push_back(std::move(check));
  }

  // The engine keeps one finding per line of the two tiers' (the AST's where both report), so
  // the cast the lexer found on this line lends its fix ranges; the AST adds no ranges of its own.
  void withLexerRanges(TypeCheck& check) const {
    for (const TypeCheck& lexed : model_.typeChecks) {
      if (lexed.where.line != check.where.line || lexed.qualifiedName != check.qualifiedName) continue;
      if (lexed.kind != check.kind || lexed.callee.end <= lexed.callee.begin) continue;
      check.callee = lexed.callee;
      check.operand = lexed.operand;
      check.castName = lexed.castName;
      check.nullTest = lexed.nullTest;
      check.testNegated = lexed.testNegated;
      check.toPointer = lexed.toPointer;
      check.operandIsObjectPointer = lexed.operandIsObjectPointer;
      return;
    }
  }

  SourceModel& model_;
  std::vector<Range> notCompiled_;
};

// Errors are expected (missing headers): the base consumer only counts them, so they stay out of
// the user's terminal.
class QuietDiagnostics : public clang::DiagnosticConsumer {};

class KeepGoingAction : public clang::ASTFrontendAction {
 public:
  explicit KeepGoingAction(MatchFinder& finder) : finder_(finder) {}
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance& ci, llvm::StringRef) override {
    // A missing include would otherwise stop template instantiation, hiding pointer casts.
    ci.getDiagnostics().setFatalsAsError(true);
    ci.getDiagnostics().setErrorLimit(0);
    return finder_.newASTConsumer();
  }

 private:
  MatchFinder& finder_;
};

class ActionFactory : public clang::tooling::FrontendActionFactory {
 public:
  explicit ActionFactory(MatchFinder& finder) : finder_(finder) {}
  std::unique_ptr<clang::FrontendAction> create() override { return std::make_unique<KeepGoingAction>(finder_); }

 private:
  MatchFinder& finder_;
};

bool isCuda(const std::string& path) {
  llvm::StringRef ext = llvm::sys::path::extension(path);
  return ext == ".cu" || ext == ".cuh";
}

std::unique_ptr<clang::tooling::CompilationDatabase> databaseFor(const CppAstOptions& options, std::string& error) {
  if (!options.compileCommandsDir.empty()) {
    auto db = clang::tooling::JSONCompilationDatabase::loadFromDirectory(options.compileCommandsDir.string(), error);
    if (!db) return nullptr;
    // Headers and files missing from the database borrow the flags of their nearest neighbour.
    return clang::tooling::inferMissingCompileCommands(std::move(db));
  }
  return std::make_unique<clang::tooling::FixedCompilationDatabase>(".", options.extraFlags);
}

}  // namespace

std::string clangAddCppAstFacts(SourceModel& model, const std::string& text, const CppAstOptions& options) {
  std::string error;
  auto db = databaseFor(options, error);
  if (!db) return options.compileCommandsDir.string() + ": " + error;

  MatchFinder finder;
  Collector collector(model, notCompiledForTorch(tokenize(model.path, text)));
  auto toLegacy = hasCanonicalType(hasDeclaration(kLegacy));
  auto pointerOrRefToLegacy = anyOf(pointsTo(toLegacy), references(toLegacy), toLegacy);
  finder.addMatcher(cxxDynamicCastExpr(hasDestinationType(pointerOrRefToLegacy)).bind("cast"), &collector);
  finder.addMatcher(cxxStaticCastExpr(hasDestinationType(pointerOrRefToLegacy)).bind("cast"), &collector);
  finder.addMatcher(cxxReinterpretCastExpr(hasDestinationType(pointerOrRefToLegacy)).bind("cast"), &collector);
  // Down from the legacy class to a subclass of it (a project's own).
  auto toSubclass = hasCanonicalType(hasDeclaration(cxxRecordDecl(isDerivedFrom(kLegacy))));
  auto pointerOrRefToSubclass = anyOf(pointsTo(toSubclass), references(toSubclass), toSubclass);
  auto fromLegacy = hasSourceExpression(ignoringImpCasts(expr(hasType(qualType(pointerOrRefToLegacy)))));
  finder.addMatcher(cxxDynamicCastExpr(hasDestinationType(pointerOrRefToSubclass), fromLegacy).bind("downcast"), &collector);
  finder.addMatcher(cxxStaticCastExpr(hasDestinationType(pointerOrRefToSubclass), fromLegacy).bind("downcast"), &collector);
  finder.addMatcher(cxxReinterpretCastExpr(hasDestinationType(pointerOrRefToSubclass), fromLegacy).bind("downcast"),
                    &collector);
  // C-style casts: `(c10d::ProcessGroupNCCL*)b`, and `(Hack*)(void*)pg.getBackend(...).get()` to a
  // project's subclass from any source, the void* hop hiding the legacy class on the way.
  finder.addMatcher(cStyleCastExpr(hasDestinationType(pointerOrRefToLegacy)).bind("cast"), &collector);
  finder.addMatcher(cStyleCastExpr(hasDestinationType(pointerOrRefToSubclass), unless(hasDestinationType(pointerOrRefToLegacy)))
                        .bind("downcast"),
                    &collector);
  finder.addMatcher(
      callExpr(callee(functionDecl(hasAnyName("dynamic_pointer_cast", "static_pointer_cast",
                                              "dynamic_intrusive_pointer_cast", "static_intrusive_pointer_cast"),
                                   hasTemplateArgument(0, refersToType(toLegacy)))))
          .bind("pointerCast"),
      &collector);

  std::string file = model.path;
  clang::tooling::ClangTool tool(*db, {file});
  tool.mapVirtualFile(file, text);
  const std::string stub = torchStub();
  tool.mapVirtualFile(kStubPath, stub);
  tool.mapVirtualFile(kCudaStubPath, kCudaStub);
  using clang::tooling::ArgumentInsertPosition;
  clang::tooling::CommandLineArguments extra = {"-fsyntax-only", "-Wno-everything", "-ferror-limit=0",
                                                "-resource-dir=" + clangResourceDir()};
  // `-x` applies to inputs after it, hence the arguments go first.
  if (isCuda(file)) {
    for (const char* a : {"-x", "cuda", "--cuda-host-only", "-nocudainc", "-nocudalib", "-include", kCudaStubPath}) extra.push_back(a);
  }
  extra.push_back("-include");
  extra.push_back(kStubPath);
  tool.appendArgumentsAdjuster(clang::tooling::getInsertArgumentAdjuster(extra, ArgumentInsertPosition::BEGIN));
  // Output flags of the real build (-o, -M*) mean nothing to a syntax-only parse.
  tool.appendArgumentsAdjuster(clang::tooling::getClangStripOutputAdjuster());
  tool.appendArgumentsAdjuster(clang::tooling::getClangStripDependencyFileAdjuster());
  QuietDiagnostics quiet;
  tool.setDiagnosticConsumer(&quiet);
  ActionFactory factory(finder);
  int rc = tool.run(&factory);
  // rc is non-zero for any compile error, which missing headers make routine; only a file Clang
  // could not start on at all is worth a note.
  if (rc != 0 && quiet.getNumErrors() == 0) return file + ": Clang could not parse this file with the given compile commands; check its entry in "
                                                   "compile_commands.json or the flags after --";
  return "";
}

}  // namespace nccl_migrate::lint
