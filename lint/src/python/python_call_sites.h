// Telling from a Python file's text alone, without parsing it, that the places where some names
// occur are only a few calls outside every loop: what decides that a file whose only reason to run
// NM401 is a call of a group wrapper gets no NM401 finding (docs/lint.md, Speed).
#pragma once

#include <cstddef>
#include <functional>
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

}  // namespace nccl_migrate::lint
