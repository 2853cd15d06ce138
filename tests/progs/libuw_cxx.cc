/*
 * libuw_cxx.cc - C++ stacks for test_unwind: templates, lambdas through
 * std::function, virtual calls and frames inside try blocks (whose
 * .eh_frame entries carry a personality and an LSDA), from a shared
 * library: uwx_recurse(depth, cb, arg) calls cb(arg) at the bottom.
 */
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" {
typedef void (*uw_cb)(void *arg);
__attribute__((visibility("default"))) int uwx_recurse(int depth, uw_cb cb,
                                                       void *arg);
}

namespace {

volatile int g_sink;
int step(int depth, uw_cb cb, void *arg);

struct Node {
  virtual ~Node() = default;
  virtual int run(int depth, uw_cb cb, void *arg) = 0;
};

struct Plain : Node {
  __attribute__((noinline)) int run(int depth, uw_cb cb, void *arg) override {
    std::string s(static_cast<size_t>(depth % 40 + 20), 'x');
    int r = step(depth - 1, cb, arg);
    return r + static_cast<int>(s.size());
  }
};

struct Guarded : Node {
  __attribute__((noinline)) int run(int depth, uw_cb cb, void *arg) override {
    try {
      std::vector<int> v(static_cast<size_t>(depth + 1), depth);
      int r = step(depth - 1, cb, arg);
      if (r < -1000000)
        throw std::runtime_error("never");
      return r + v.back();
    } catch (const std::exception &) {
      return -1;
    }
  }
};

template <int N>
__attribute__((noinline)) int tmpl(int depth, uw_cb cb, void *arg) {
  if constexpr (N > 0) {
    if (depth % 2)
      return tmpl<N - 1>(depth, cb, arg) + N;
  }
  return step(depth - 1, cb, arg) + N;
}

__attribute__((noinline)) int through_function(int depth, uw_cb cb, void *arg) {
  std::function<int(int)> f = [cb, arg](int d) {
    return step(d - 1, cb, arg) + 1;
  };
  int r = f(depth);
  g_sink = r;
  return r;
}

__attribute__((noinline)) int step(int depth, uw_cb cb, void *arg) {
  if (depth <= 0) {
    cb(arg);
    return 0;
  }
  switch (depth % 4) {
  case 0: {
    std::unique_ptr<Node> n(new Plain);
    return n->run(depth, cb, arg);
  }
  case 1: {
    std::unique_ptr<Node> n(new Guarded);
    return n->run(depth, cb, arg);
  }
  case 2:
    return tmpl<3>(depth, cb, arg);
  default:
    return through_function(depth, cb, arg);
  }
}

} // namespace

int uwx_recurse(int depth, uw_cb cb, void *arg) {
  int r = step(depth, cb, arg);
  g_sink = r;
  return r;
}
