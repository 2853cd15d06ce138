// workload_templates.cc - a real workload for bench_preload: `g++ -O2 -c`
// of this file, the template-heavy C++ a compiler spends its allocations
// on (instantiation, overload resolution, inlining). It is compiled, never
// run or linked; it only has to be valid C++17 that makes g++ work for a
// second or two.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace wl {

// ---- tuple metaprogramming: a type list walked at compile time.

template <typename... T> struct list {};

template <typename L, template <typename> class F> struct map_list;
template <typename... T, template <typename> class F>
struct map_list<list<T...>, F> {
  using type = list<typename F<T>::type...>;
};

template <typename T> struct as_vector { using type = std::vector<T>; };
template <typename T> struct as_optional { using type = std::optional<T>; };

template <typename L> struct as_tuple;
template <typename... T> struct as_tuple<list<T...>> {
  using type = std::tuple<T...>;
};

template <std::size_t N, typename... T> struct repeat {
  using type = typename repeat<N - 1, T..., std::pair<int, std::string>>::type;
};
template <typename... T> struct repeat<0, T...> { using type = list<T...>; };

template <typename Tuple, typename F, std::size_t... I>
void for_each_impl(Tuple &t, F &&f, std::index_sequence<I...>) {
  (f(std::get<I>(t)), ...);
}
template <typename... T, typename F> void for_each(std::tuple<T...> &t, F &&f) {
  for_each_impl(t, std::forward<F>(f), std::index_sequence_for<T...>{});
}

// ---- a variant-based expression tree, visited several ways.

struct num;
struct add;
struct mul;
struct var;
using expr = std::variant<num, add, mul, var>;
using expr_ptr = std::shared_ptr<expr>;
struct num {
  double v;
};
struct add {
  expr_ptr l, r;
};
struct mul {
  expr_ptr l, r;
};
struct var {
  std::string name;
};

template <typename... F> struct overload : F... { using F::operator()...; };
template <typename... F> overload(F...) -> overload<F...>;

double eval(const expr &e, const std::map<std::string, double> &env);
inline double eval_ptr(const expr_ptr &p,
                       const std::map<std::string, double> &env) {
  return eval(*p, env);
}
double eval(const expr &e, const std::map<std::string, double> &env) {
  return std::visit(
      overload{
          [](const num &n) { return n.v; },
          [&](const add &a) { return eval_ptr(a.l, env) + eval_ptr(a.r, env); },
          [&](const mul &m) { return eval_ptr(m.l, env) * eval_ptr(m.r, env); },
          [&](const var &v) {
            auto it = env.find(v.name);
            return it == env.end() ? 0.0 : it->second;
          }},
      e);
}

std::string show(const expr &e) {
  return std::visit(
      overload{[](const num &n) { return std::to_string(n.v); },
               [](const add &a) {
                 return "(" + show(*a.l) + " + " + show(*a.r) + ")";
               },
               [](const mul &m) { return show(*m.l) + " * " + show(*m.r); },
               [](const var &v) { return v.name; }},
      e);
}

// ---- containers of containers, sorted, grouped, searched.

template <typename K, typename V>
std::map<K, std::vector<V>> group(const std::vector<std::pair<K, V>> &in) {
  std::map<K, std::vector<V>> out;
  for (const auto &[k, v] : in)
    out[k].push_back(v);
  for (auto &[k, vs] : out)
    std::sort(vs.begin(), vs.end());
  return out;
}

template <typename K, typename V>
std::unordered_map<K, std::size_t>
histogram(const std::vector<std::pair<K, V>> &in) {
  std::unordered_map<K, std::size_t> h;
  for (const auto &kv : in)
    ++h[kv.first];
  return h;
}

template <typename T, typename Pred>
std::vector<T> stable_filter(std::vector<T> v, Pred p) {
  v.erase(std::remove_if(v.begin(), v.end(), std::not_fn(p)), v.end());
  std::stable_sort(v.begin(), v.end());
  return v;
}

template <typename T> struct summary {
  T lo, hi, sum;
  std::size_t n;
};
template <typename It> auto summarise(It b, It e) {
  using T = typename std::iterator_traits<It>::value_type;
  auto [lo, hi] = std::minmax_element(b, e);
  return summary<T>{*lo, *hi, std::accumulate(b, e, T{}),
                    static_cast<std::size_t>(std::distance(b, e))};
}

// ---- a small event bus of std::function, keyed by name.

template <typename... Args> class bus {
public:
  using handler = std::function<void(const Args &...)>;
  void on(const std::string &name, handler h) {
    subs_[name].push_back(std::move(h));
  }
  std::size_t emit(const std::string &name, const Args &...args) const {
    auto it = subs_.find(name);
    if (it == subs_.end())
      return 0;
    for (const auto &h : it->second)
      h(args...);
    return it->second.size();
  }

private:
  std::unordered_map<std::string, std::vector<handler>> subs_;
};

// ---- lines of text parsed into records (by hand: one std::regex
// instantiation alone takes g++ -O2 3-4 s, more than this whole file).

struct record {
  std::string key;
  int value;
  std::optional<std::string> note;
  bool operator<(const record &o) const {
    return std::tie(key, value, note) < std::tie(o.key, o.value, o.note);
  }
};

std::vector<record> parse(const std::string &text) {
  std::vector<record> out;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) {
    std::istringstream ls(l);
    record r;
    char eq = 0;
    if (!(ls >> r.key >> eq >> r.value) || eq != '=')
      continue;
    std::string rest;
    if (std::getline(ls >> std::ws, rest) && !rest.empty() && rest[0] == '#')
      r.note = rest.substr(1);
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string rewrite(const std::string &s) {
  std::string r = s.size() > 1 ? s.substr(1) + s[0] : s;
  return r + "ay";
}

// ---- everything instantiated for several types at once.

template <typename T> struct workload {
  std::vector<std::pair<std::string, T>> items;
  std::set<T> seen;
  std::map<std::string, std::vector<T>> grouped() const {
    return group(items);
  }
  std::unordered_map<std::string, std::size_t> counts() const {
    return histogram(items);
  }
  std::vector<T> big() const {
    std::vector<T> v;
    for (const auto &kv : items)
      v.push_back(kv.second);
    return stable_filter(v, [](const T &x) { return x > T{}; });
  }
  auto stats() const {
    auto v = big();
    return summarise(v.begin(), v.end());
  }
};

using tuple_of_vectors = as_tuple<
    map_list<list<int, long, double, std::string, char, unsigned, float, short>,
             as_vector>::type>::type;
using tuple_of_optionals =
    as_tuple<map_list<repeat<12>::type, as_optional>::type>::type;

std::size_t touch_all(tuple_of_vectors &t, tuple_of_optionals &o) {
  std::size_t n = 0;
  for_each(t, [&](auto &v) {
    n += v.size();
    std::reverse(v.begin(), v.end());
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  });
  for_each(o, [&](auto &opt) {
    if (opt)
      n += opt->second.size() + static_cast<std::size_t>(opt->first);
  });
  return n;
}

} // namespace wl

// The entry points, with external linkage so nothing is thrown away.
std::size_t wl_run(const std::string &text) {
  using namespace wl;
  std::size_t n = 0;
  workload<int> wi;
  workload<std::string> ws;
  for (const auto &r : parse(text)) {
    wi.items.emplace_back(r.key, r.value);
    ws.items.emplace_back(r.key, r.note.value_or(rewrite(r.key)));
  }
  n += wi.grouped().size() + ws.grouped().size();
  n += wi.counts().size() + ws.counts().size();
  n += static_cast<std::size_t>(wi.stats().sum) + ws.stats().n;

  bus<int, std::string> b;
  bus<double, std::vector<int>, std::map<int, std::string>> b2;
  b.on("x", [&](const int &i, const std::string &s) {
    n += static_cast<std::size_t>(i) + s.size();
  });
  b2.on("y",
        [&](const double &, const std::vector<int> &v,
            const std::map<int, std::string> &m) { n += v.size() + m.size(); });
  n += b.emit("x", 3, "abc") + b2.emit("y", 1.5, {1, 2}, {{1, "a"}});

  auto e = std::make_shared<expr>(
      add{std::make_shared<expr>(num{2}),
          std::make_shared<expr>(mul{std::make_shared<expr>(var{"x"}),
                                     std::make_shared<expr>(num{3})})});
  n += static_cast<std::size_t>(eval(*e, {{"x", 4.0}})) + show(*e).size();

  tuple_of_vectors t;
  tuple_of_optionals o;
  n += touch_all(t, o);
  return n;
}
