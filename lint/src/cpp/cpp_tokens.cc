// Clang's raw lexer over one file (cpp_tokens.h).
#include "cpp/cpp_tokens.h"

#include <utility>

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/Basic/FileManager.h>
#include <clang/Basic/LangOptions.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Lex/Lexer.h>
#include <llvm/Support/MemoryBuffer.h>

namespace nccl_migrate::lint {

std::vector<Tok> tokenize(const std::string& path, const std::string& text) {
  clang::FileSystemOptions fsOptions;
  clang::FileManager files(fsOptions);
  auto diagOptions = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  clang::DiagnosticsEngine diags(llvm::makeIntrusiveRefCnt<clang::DiagnosticIDs>(), diagOptions);
  clang::SourceManager sources(diags, files);
  auto buffer = llvm::MemoryBuffer::getMemBuffer(text, path, /*RequiresNullTerminator=*/false);
  clang::FileID file = sources.createFileID(std::move(buffer));
  clang::LangOptions lang;
  lang.CPlusPlus = lang.CPlusPlus11 = lang.CPlusPlus14 = lang.CPlusPlus17 = lang.CPlusPlus20 = true;
  lang.CUDA = true;  // `<<<` launches lex as one token instead of confusing template scanning
  clang::Lexer lexer(file, sources.getBufferOrFake(file), sources, lang);

  lexer.SetCommentRetentionState(true);  // comments carry NOLINT suppressions

  std::vector<Tok> out;
  clang::Token token;
  while (true) {
    lexer.LexFromRawLexer(token);
    if (token.is(clang::tok::eof)) break;
    Tok t{token.getKind(), {}, {}, sources.getFileOffset(token.getLocation()), 0, token.isAtStartOfLine()};
    t.end = t.begin + token.getLength();
    if (token.is(clang::tok::raw_identifier)) {
      t.text = token.getRawIdentifier().str();
    } else if (token.isLiteral() || token.is(clang::tok::comment)) {
      // A comment has no literal data: its text is read from the buffer, as a literal's may be.
      const char* data = token.getLiteralData() ? token.getLiteralData() : sources.getCharacterData(token.getLocation());
      t.text = std::string(data, token.getLength());
    } else if (const char* p = clang::tok::getPunctuatorSpelling(token.getKind())) {
      t.text = p;
    }
    clang::PresumedLoc loc = sources.getPresumedLoc(token.getLocation());
    t.where = {static_cast<int>(loc.getLine()), static_cast<int>(loc.getColumn())};
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace nccl_migrate::lint
