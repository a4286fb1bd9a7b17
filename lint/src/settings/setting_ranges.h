// Where a setting stands in a line-oriented file (shell, Dockerfile, YAML, .env, TOML), in bytes,
// for fixes that remove it or cut an item out of its value: what the rules may delete without
// leaving a line that no longer parses.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

// The lines of a file as byte spans (a `\r` before the newline belongs to the line's end).
class LineSpans {
 public:
  explicit LineSpans(std::string_view text);
  size_t start(size_t index) const { return starts_[index]; }
  // The whole line with its newline: what removing the line removes.
  Range withNewline(size_t index) const;
  // The line continues onto the next (`\` at its end) or continues the previous one: removing
  // it alone would join what is left to another statement.
  bool continued(size_t index) const;

 private:
  std::string_view text_;
  std::vector<size_t> starts_;
};

// The value as written between [begin, end) of `text`, blanks, a trailing comma and matching
// quotes stripped the way the frontends strip them, so its bytes are the setting's value.
Range unquotedRange(std::string_view text, size_t begin, size_t end);

// What removing the assignment word `word` (bytes of the file) from the line's code removes:
// the whole line when the word is all the line sets (`export X=0`, `ENV X=0`, `X=0`), else the
// word and the blanks that separate it (`X=0 torchrun ...`, `ENV A=1 X=0`); empty when what
// would be left does not stand on its own (`X=0; cmd`, a continuation line).
Range assignmentStatement(std::string_view code, size_t codeStart, Range word, Range line, bool continued);

// The shell command on line `index` is the only one between a block's opening (`then`, `do`,
// `else`, `{`, `(`) and its end (`fi`, `done`, `else`, `elif`, `}`, `)`, `;;`): without it the
// block would be empty, which the shell rejects. Blank and comment lines do not count.
bool onlyCommandOfShellBlock(const std::vector<std::string>& lines, size_t index);

}  // namespace nccl_migrate::lint
