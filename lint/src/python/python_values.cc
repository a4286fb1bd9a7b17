// Value tracing over a Python file's SourceModel: what an argument is made of, with names replaced
// by the values Python's scoping lets reach them (the function's own bindings, else the module's)
// and calls of the file's functions by what they return. Rules ask it for evidence ("the device
// comes from LOCAL_RANK") instead of reading names.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "nccl_migrate/lint/source_model.h"
#include "python_frontend.h"

namespace nccl_migrate::lint {
namespace {

constexpr int kMaxSteps = 4;    // names and calls followed, one after another
constexpr size_t kMaxNodes = 96;  // per traced value: a name used everywhere stays cheap

bool before(const Location& a, const Location& b) { return a.line < b.line || (a.line == b.line && a.column < b.column); }

// Whether two places stand in different arms of one `if`, so that no run passes both.
bool exclusive(const std::vector<Call::Arm>& a, const std::vector<Call::Arm>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i].statement != b[i].statement) return false;
    if (a[i].index != b[i].index) return true;
  }
  return false;
}

// Whether every run that reaches a place with `inner` arms has passed one with `outer` arms in
// the same function: `outer` stands in no arm that `inner` is not in too.
bool alwaysPassed(const std::vector<Call::Arm>& outer, const std::vector<Call::Arm>& inner) {
  if (outer.size() > inner.size()) return false;
  for (size_t i = 0; i < outer.size(); ++i) {
    if (outer[i].statement != inner[i].statement || outer[i].index != inner[i].index) return false;
  }
  return true;
}

// Where a value is read: its function and the arms around it.
struct Place {
  int functionId;
  const std::vector<Call::Arm>* branches;
  Location where;
};

Place placeOf(const Binding& b) { return {b.functionId, &b.branches, b.where}; }

class Tracer {
 public:
  explicit Tracer(const SourceModel& model) : model_(model) {}

  TracedValue run(int root, const Place& place) {
    copy(root, place, 0);
    return std::move(out_);
  }

 private:
  // Copies the node at `index` (in the model) and what it is made of into the result, following
  // names and calls; returns its index in the result.
  int copy(int index, const Place& place, int steps) {
    const ValueNode& node = model_.values[static_cast<size_t>(index)];
    if (out_.nodes.size() >= kMaxNodes) return append({ValueNode::Kind::Unknown, "...", "", {}, node.where});
    if (place.functionId != kOtherFileReturns && steps < kMaxSteps &&
        (node.kind == ValueNode::Kind::Name || node.kind == ValueNode::Kind::Attribute)) {
      std::vector<const Binding*> found = reaching(node.text, place);
      if (int followed = follow(node, found, steps); followed >= 0) return followed;
    }
    // Another file's values (kOtherFileReturns) were traced in that file: its names and calls
    // mean nothing here.
    bool here = place.functionId != kOtherFileReturns;
    if (here && steps < kMaxSteps) {
      if (int read = environmentRead(node, place, steps); read >= 0) return read;
    }
    if (here && steps < kMaxSteps && node.kind == ValueNode::Kind::Call) {
      std::vector<const Binding*> found = returnsOf(node.text);
      if (int followed = follow(node, found, steps); followed >= 0) return followed;
    }
    int at = append({node.kind, node.text, node.keyword, {}, node.where});
    for (int operand : node.operands) {
      int copied = copy(operand, place, steps);
      // A keyword names the argument, whatever value stands in for it.
      const std::string& keyword = model_.values[static_cast<size_t>(operand)].keyword;
      if (!keyword.empty()) out_.nodes[static_cast<size_t>(copied)].keyword = keyword;
      out_.nodes[static_cast<size_t>(at)].operands.push_back(copied);
    }
    return at;
  }

  // The values `found` bind, in place of `node`: the one, or OneOf them all; a binding with no
  // value read here stands as `node` itself. -1 when nothing was found or nothing has a value.
  int follow(const ValueNode& node, const std::vector<const Binding*>& found, int steps) {
    bool anyValue = false;
    for (const Binding* b : found) anyValue |= b->value >= 0;
    if (!anyValue) return -1;
    if (found.size() == 1) return copy(found.front()->value, placeOf(*found.front()), steps + 1);
    int at = append({ValueNode::Kind::OneOf, node.text, "", {}, node.where});
    for (const Binding* b : found) {
      int copied = b->value >= 0 ? copy(b->value, placeOf(*b), steps + 1)
                                 : append({node.kind, node.text, "", {}, b->where});
      out_.nodes[static_cast<size_t>(at)].operands.push_back(copied);
    }
    return at;
  }

  // An item of the environment by a known key, read through a name or dict that holds it
  // (kEnviron): `env["RANK"]` and `env.get("RANK", d)` as os.environ's; -1 for anything else.
  int environmentRead(const ValueNode& node, const Place& place, int steps) {
    using Kind = ValueNode::Kind;
    if (node.kind == Kind::Item && node.operands.size() == 2) {
      const ValueNode& key = model_.values[static_cast<size_t>(node.operands[1])];
      if (key.kind != Kind::Literal || !holdsEnvironment(model_.values[static_cast<size_t>(node.operands[0])], place, steps)) return -1;
      return append({Kind::Environment, key.text, "", {}, node.where});
    }
    if (node.kind != Kind::Call || !node.text.ends_with(".get") || node.operands.empty() || node.operands.size() > 2) return -1;
    const ValueNode& key = model_.values[static_cast<size_t>(node.operands[0])];
    std::string receiver = node.text.substr(0, node.text.size() - 4);
    if (key.kind != Kind::Literal || !key.keyword.empty() || !holdsEnvironment({Kind::Name, receiver, "", {}, node.where}, place, steps)) return -1;
    int at = append({Kind::Environment, key.text, "", {}, node.where});
    if (node.operands.size() == 2) {
      int fallback = copy(node.operands[1], place, steps + 1);
      out_.nodes[static_cast<size_t>(at)].operands.push_back(fallback);
    }
    return at;
  }

  // Whether a value is the environment (kEnviron) wherever it may come from here.
  bool holdsEnvironment(const ValueNode& n, const Place& place, int steps) const {
    using Kind = ValueNode::Kind;
    if (n.kind == Kind::Attribute && n.text == kEnviron) return true;
    if ((n.kind != Kind::Name && n.kind != Kind::Attribute) || steps >= kMaxSteps) return false;
    std::vector<const Binding*> found = reaching(n.text, place);
    for (const Binding* b : found)
      if (b->value < 0 || !holdsEnvironment(model_.values[static_cast<size_t>(b->value)], placeOf(*b), steps + 1)) return false;
    return !found.empty();
  }

  int append(ValueNode node) {
    out_.nodes.push_back(std::move(node));
    return static_cast<int>(out_.nodes.size()) - 1;
  }

  // The bindings of `name` that may hold where `place` reads it: in its function, those before it
  // not in another arm of an `if`, latest first, back to one that always runs on the way; in a
  // function that binds the name nowhere, the module's (the last that always runs and those
  // after it, since the function may run once the module has run).
  std::vector<const Binding*> reaching(const std::string& name, const Place& place) const {
    std::vector<const Binding*> out;
    bool boundInFunction = false;
    for (auto it = model_.bindings.rbegin(); it != model_.bindings.rend(); ++it) {
      const Binding& b = *it;
      if (b.name != name || b.functionId != place.functionId) continue;
      boundInFunction = true;
      if (!before(b.where, place.where) || exclusive(b.branches, *place.branches)) continue;
      out.push_back(&b);
      if (alwaysPassed(b.branches, *place.branches)) break;
    }
    if (boundInFunction || place.functionId < 0) return out;
    for (auto it = model_.bindings.rbegin(); it != model_.bindings.rend(); ++it) {
      if (it->name != name || it->functionId != -1) continue;
      out.push_back(&*it);
      if (it->branches.empty()) break;
    }
    return out;
  }

  // What a call of the file's function `name` returns, when the file defines one function of
  // that name (a method's name is left alone: which class's it is is not known here), or of
  // another file's function the frontend recorded under that name (kOtherFileReturns).
  std::vector<const Binding*> returnsOf(const std::string& name) const {
    std::vector<const Binding*> out;
    for (const Binding& r : model_.returns)
      if (r.functionId == kOtherFileReturns && r.name == name) return {&r};
    int id = -1;
    for (size_t i = 0; i < model_.functions.size(); ++i) {
      if (model_.functions[i] != name) continue;
      if (id >= 0) return out;
      id = static_cast<int>(i);
    }
    if (id < 0) return out;
    for (const Binding& r : model_.returns)
      if (r.functionId == id) out.push_back(&r);
    return out;
  }

  const SourceModel& model_;
  TracedValue out_;
};

}  // namespace

TracedValue traceValue(const SourceModel& model, const Call& call, const Argument& argument) {
  if (argument.value < 0 || static_cast<size_t>(argument.value) >= model.values.size()) return {};
  return Tracer(model).run(argument.value, {call.functionId, &call.branches, call.where});
}

TracedValue traceBinding(const SourceModel& model, const Binding& binding) {
  if (binding.value < 0 || static_cast<size_t>(binding.value) >= model.values.size()) return {};
  return Tracer(model).run(binding.value, placeOf(binding));
}

std::string parameterAt(const SourceModel& model, int functionId, size_t index) {
  for (const Binding& b : model.bindings) {
    if (b.name != kParameters || b.functionId != functionId || b.value < 0) continue;
    const ValueNode& list = model.values[static_cast<size_t>(b.value)];
    return index < list.operands.size() ? model.values[static_cast<size_t>(list.operands[index])].text : "";
  }
  return "";
}

const Binding* armCondition(const SourceModel& model, int functionId, const std::vector<Call::Arm>& branches,
                            size_t depth, int index) {
  if (depth >= branches.size()) return nullptr;
  for (const Binding& b : model.bindings) {
    if (b.name != kArmCondition || b.functionId != functionId || b.branches.size() != depth + 1) continue;
    if (b.branches[depth].statement != branches[depth].statement || b.branches[depth].index != index) continue;
    if (alwaysPassed(std::vector<Call::Arm>(b.branches.begin(), b.branches.end() - 1), branches)) return &b;
  }
  return nullptr;
}

}  // namespace nccl_migrate::lint
