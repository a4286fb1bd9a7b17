// Telling from a Python file's text alone, without parsing it, that the places where some names
// occur are only a few calls outside every loop: what decides that a file whose only reason to run
// NM401 is a call of a group wrapper gets no NM401 finding (docs/lint.md, Speed); and where a file
// keeps torch's group creators under other names, which the parts of it parsed for NM401 must see;
// and which functions its device selections call, which NM102 follows into other files.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nccl_migrate::lint {

// Whether each span ([begin, end) in `text`, in order) is a call (`name(`) outside every loop,
// loop `else` and comprehension, a definition of the name, a use that binds no other name to it
// (an import without `as`, an argument, a base class, an annotation), or lies in a comment or a
// string that is not an f-string; and the calls number fewer than `maxCalls` (0: any number).
// False wherever the text leaves a doubt: a name bound to it (`import ... as`, `x = mod.name`, which
// the frontend follows to the calls of the new name), an f-string around one, a tab or form feed in
// an indentation, an unterminated string. A `def` does not end its loop here (the frontend restarts the depth inside
// one): a call in a function defined in a loop counts as in the loop, which only costs a parse.
//
// `mayCount(receiver, name)`, when set, tells which calls on a receiver (`receiver.name(`, receiver
// the name right before the dot) can be group creations at all: the frontend counts a call on a
// module only when the module's last name (or its package's) is a wrapper's, and that name is the
// receiver's as written unless the receiver is one name bound some other way than `import` or
// `from ... import` without `as` (then the call counts). A call that cannot count is no site, in a
// loop or not.
using ReceiverFilter = std::function<bool(std::string_view receiver, std::string_view name)>;
bool onlyFewCallsOutsideLoops(std::string_view text, const std::vector<std::pair<size_t, size_t>>& spans, size_t maxCalls,
                              const ReceiverFilter& mayCount = {});

// The same questions asked of one text several times (NM401's decision asks up to three): the
// text is read as Python's tokenizer reads it once, on the first question, not once per question.
// `text` must outlive it.
class PythonCallSites {
 public:
  explicit PythonCallSites(std::string_view text);
  ~PythonCallSites();
  bool onlyFewCallsOutsideLoops(const std::vector<std::pair<size_t, size_t>>& spans, size_t maxCalls,
                                const ReceiverFilter& mayCount = {}) const;

 private:
  struct Read;
  std::string_view text_;
  mutable std::unique_ptr<const Read> read_;  // the text's logical lines, once asked
};

// Where the text keeps one of torch's group creators (`creators`, their last names) under another
// name to call later, which NM401 follows (`_orig = dist.new_group` in a class body, `self._orig =
// dist.new_group`, `_SAVED["k"] = dist.new_group`, `make = staticmethod(dist.new_group)`, a
// module's `_real = dist.new_group`), from the places `words` ([begin, end), as the prefilter found
// NM401's words; those that are no creator's whole name are passed over): the ends of every
// whole-word mention of the names that keep one (`_orig`, `_SAVED`, `make`, `_real`), sorted, so
// that the statements calling through them (`cls._orig(ranks)`) are parsed with the ones that hold
// the creators' words. Null where a creator is kept under a name the line does not show (a dict
// literal's entry `"k": dist.new_group`): the whole file is needed. A creator called, or assigned
// to, is none kept.
std::optional<std::vector<size_t>> savedCreatorMentions(std::string_view text, const std::vector<std::pair<size_t, size_t>>& words,
                                                        const std::set<std::string>& creators);

// The bare names called in the text's device selections, as NM102 reads them: inside the arguments
// of `set_device(...)` and `torch.device(...)`, and inside an f-string's `cuda:{...}` (`get_rank`
// of `torch.cuda.set_device(get_rank())`), not a method or a module's function (`x.get_rank()`).
std::set<std::string> namesCalledInDeviceSelections(std::string_view text);

}  // namespace nccl_migrate::lint
