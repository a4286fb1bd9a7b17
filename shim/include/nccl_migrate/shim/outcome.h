// A parsed value or the sentence that says why there is none. The shim reports errors as text
// users read (in `doctor`, in exceptions raised by the backends), so an error is a string.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace nccl_migrate::shim {

template <typename T>
class Outcome {
 public:
  static Outcome success(T value) { return Outcome(std::in_place_index<0>, std::move(value)); }
  static Outcome failure(std::string error) { return Outcome(std::in_place_index<1>, std::move(error)); }

  bool ok() const { return state_.index() == 0; }
  const T& value() const { return std::get<0>(state_); }  // only when ok()
  const std::string& error() const { return std::get<1>(state_); }  // only when !ok()

 private:
  template <std::size_t I, typename V>
  Outcome(std::in_place_index_t<I> index, V&& v) : state_(index, std::forward<V>(v)) {}
  std::variant<T, std::string> state_;
};

}  // namespace nccl_migrate::shim
