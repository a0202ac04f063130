// convbank::Error: the one exception type the library throws at configuration time.
#pragma once

#include <stdexcept>
#include <string>

namespace convbank {

// Thrown when constructing layers, loading weights, opening files or validating shapes.
// The message names the argument, tensor or file, the offending value and the rule, e.g.
//   "Conv1d: stride must be >= 1, got 0".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Returned by the real-time path (stream process()), which never throws.
enum class Status {
  kOk = 0,
  kInvalidArgument,  // a precondition checked in prepare() does not hold for this call
  kBackendFailure,   // a device call failed; the stream must be reset or prepared again
};

}  // namespace convbank
