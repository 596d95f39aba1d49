// stanaccel's bridge between one compiled Stan model and Python.
//
// This file is compiled once per machine against `stan::model::model_base`
// and linked with each model's stanc-generated C++ (which defines
// `new_model`), so a new Stan program only costs the compile of its own code.
// It exposes one class, `Model`, holding a live model instance: log density
// and gradient without copies and without the GIL, constrain/unconstrain, and
// Stan's own services with in-memory writers: NUTS (`NutsChain`), one path of
// Pathfinder (`PathfinderPath`) and L-BFGS optimisation with the Hessian at
// the mode (`Optimization`). Errors cross as the Python exception types of
// `stanaccel.stan.errors`. What the program's `print` statements write goes
// to `stanaccel.stan.prints.forward` (see `forward_print`).

#include <stan/io/empty_var_context.hpp>
#include <stan/io/json/json_data.hpp>
#include <stan/math/rev.hpp>
#include <stan/model/model_base.hpp>
#include <stan/services/sample/hmc_nuts_dense_e.hpp>
#include <stan/services/sample/hmc_nuts_dense_e_adapt.hpp>
#include <stan/services/sample/hmc_nuts_diag_e.hpp>
#include <stan/services/sample/hmc_nuts_diag_e_adapt.hpp>
#include <stan/services/optimize/lbfgs.hpp>
#include <stan/services/pathfinder/single.hpp>
#include <stan/math/rev/functor/finite_diff_hessian_auto.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

// Defined by the stanc-generated translation unit of each model.
stan::model::model_base &new_model(stan::io::var_context &data_context, unsigned int seed,
                                   std::ostream *msg_stream);

namespace {

using vector_d = Eigen::Matrix<double, Eigen::Dynamic, 1>;
using vector_v = Eigen::Matrix<stan::math::var, Eigen::Dynamic, 1>;
using array_d = py::array_t<double, py::array::c_style | py::array::forcecast>;

// Exceptions that Python code catches by type (set once at import).
PyObject *domain_error_type = nullptr;
PyObject *evaluation_error_type = nullptr;
PyObject *data_error_type = nullptr;
// stanaccel.stan.prints.forward, which shows what the program printed (set once at import).
PyObject *print_sink = nullptr;

struct python_error : std::exception {
  PyObject *type;
  std::string message;
  python_error(PyObject *t, std::string m) : type(t), message(std::move(m)) {}
  const char *what() const noexcept override { return message.c_str(); }
};

// Every thread that runs reverse-mode autodiff needs its own tape.
void ensure_autodiff_stack() { static thread_local stan::math::ChainableStack thread_stack; }

// Text written by the program's `print` statements, to Python's sink (the GIL must be held).
// Nothing is called when nothing was printed, so a program without print pays nothing.
void forward_print(const std::string &text) {
  if (text.empty() || print_sink == nullptr) return;
  PyObject *value = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  PyObject *result = value ? PyObject_CallOneArg(print_sink, value) : nullptr;
  Py_XDECREF(value);
  if (result == nullptr)
    PyErr_Clear();  // debugging output that cannot be shown never fails an evaluation
  else
    Py_DECREF(result);
}

// The stream one evaluation's `print` statements write to (Stan passes it as `msgs`): one per thread.
std::ostringstream &print_stream() {
  static thread_local std::ostringstream stream;
  return stream;
}

// What this thread's print stream holds, emptying it.
std::string take_printed() {
  std::ostringstream &stream = print_stream();
  if (stream.tellp() <= 0) return {};
  std::string text = stream.str();
  stream.str(std::string());
  stream.clear();
  return text;
}

// An evaluation shorter than this keeps the GIL: handing it over and taking it back costs a few
// microseconds, and with chains in threads the hand-offs queue behind one another (four chains of a
// 1 us gradient ran 2.4x slower than in turn). Longer ones release it, so that chains run in parallel.
constexpr std::chrono::microseconds KEEP_GIL_BELOW{10};

// Run `evaluate(msgs)`, with the GIL released if the last evaluation took KEEP_GIL_BELOW or more
// (`release_gil` says so, and is updated), then forward what it printed (GIL held) and return its
// value or rethrow its exception: output printed before a `reject` shows too.
template <typename F>
auto printing(F &&evaluate, std::atomic<bool> &release_gil)
    -> decltype(evaluate(static_cast<std::ostream *>(nullptr))) {
  using value_type = decltype(evaluate(static_cast<std::ostream *>(nullptr)));
  std::exception_ptr error;
  std::string printed;
  value_type value{};
  auto run = [&] {
    take_printed();  // anything left by an interrupted call is not this call's
    auto start = std::chrono::steady_clock::now();
    try {
      value = evaluate(&print_stream());
    } catch (...) {
      error = std::current_exception();
    }
    release_gil.store(std::chrono::steady_clock::now() - start >= KEEP_GIL_BELOW, std::memory_order_relaxed);
    printed = take_printed();
  };
  if (release_gil.load(std::memory_order_relaxed)) {
    py::gil_scoped_release release;
    run();
  } else {
    run();
  }
  forward_print(printed);
  if (error) std::rethrow_exception(error);
  return value;
}

class Model {
 public:
  Model(const std::string &data_json, unsigned int seed) {
    std::stringstream messages;
    try {
      std::istringstream in(data_json);
      stan::json::json_data data(in);
      model_.reset(&new_model(data, seed, &messages));
    } catch (const std::exception &e) {
      std::string text = e.what();
      if (!messages.str().empty()) text = messages.str() + "\n" + text;
      throw python_error(data_error_type, text);
    }
    forward_print(messages.str());  // the transformed data block's print statements
    num_unc_ = model_->num_params_r();
  }

  std::string name() const { return model_->model_name(); }
  std::size_t param_unc_num() const { return num_unc_; }

  std::size_t param_num(bool include_tp, bool include_gq) const {
    std::vector<std::string> names;
    model_->constrained_param_names(names, include_tp, include_gq);
    return names.size();
  }

  std::vector<std::string> param_names(bool include_tp, bool include_gq) const {
    std::vector<std::string> names;
    model_->constrained_param_names(names, include_tp, include_gq);
    return names;
  }

  std::vector<std::string> param_unc_names() const {
    std::vector<std::string> names;
    model_->unconstrained_param_names(names, false, false);
    return names;
  }

  // (name, dims) of each parameter block variable, in declaration order.
  std::vector<std::pair<std::string, std::vector<std::size_t>>> variables(bool include_tp,
                                                                          bool include_gq) const {
    std::vector<std::string> names;
    std::vector<std::vector<std::size_t>> dims;
    model_->get_param_names(names, include_tp, include_gq);
    model_->get_dims(dims, include_tp, include_gq);
    std::vector<std::pair<std::string, std::vector<std::size_t>>> out;
    for (std::size_t i = 0; i < names.size(); ++i) out.emplace_back(names[i], dims[i]);
    return out;
  }

  double log_density(const array_d &theta, bool propto, bool jacobian) const {
    Eigen::VectorXd x = checked_point(theta);
    return printing([&](std::ostream *msgs) -> double {
      // Also for doubles: the error path recovers autodiff memory, which needs this thread's tape.
      ensure_autodiff_stack();
      try {
        if (propto) {
          // Dropping constants needs autodiff types: with doubles Stan drops every term.
          vector_v xv = x.cast<stan::math::var>();
          double lp = var_log_prob(xv, true, jacobian, msgs).val();
          stan::math::recover_memory();
          return lp;
        }
        return jacobian ? model_->log_prob_jacobian(x, msgs) : model_->log_prob(x, msgs);
      } catch (...) {
        stan::math::recover_memory();
        rethrow_evaluation_error();
      }
    }, release_gil_);
  }

  double log_density_gradient(const array_d &theta, bool propto, bool jacobian,
                              py::array_t<double, py::array::c_style> grad_out) const {
    Eigen::VectorXd x = checked_point(theta);
    if (static_cast<std::size_t>(grad_out.size()) != num_unc_)
      throw python_error(PyExc_ValueError, "gradient buffer has the wrong length");
    double *grad = grad_out.mutable_data();
    return printing([&](std::ostream *msgs) { return gradient(x, propto, jacobian, grad, msgs); }, release_gil_);
  }

  // Mean seconds per gradient evaluation measured inside C++ (for benchmarks).
  double time_log_density_gradient(const array_d &theta, int repeats) const {
    Eigen::VectorXd x = checked_point(theta);
    std::vector<double> grad(num_unc_);
    py::gil_scoped_release release;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) gradient(x, true, true, grad.data(), nullptr);
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count() / repeats;
  }

  py::array_t<double> param_constrain(const array_d &theta, bool include_tp, bool include_gq,
                                      unsigned int seed) const {
    Eigen::VectorXd x = checked_point(theta);
    Eigen::VectorXd out;
    printing([&](std::ostream *msgs) {
      ensure_autodiff_stack();
      stan::rng_t rng(seed);
      try {
        model_->write_array(rng, x, out, include_tp, include_gq, msgs);
      } catch (...) {
        rethrow_evaluation_error();
      }
      return 0;
    }, release_gil_);
    return to_numpy(out);
  }

  py::array_t<double> param_unconstrain(const array_d &theta) const {
    std::size_t expected = param_num(false, false);
    if (static_cast<std::size_t>(theta.size()) != expected)
      throw python_error(PyExc_ValueError, "constrained parameter vector has length " +
                                               std::to_string(theta.size()) + ", expected " +
                                               std::to_string(expected));
    Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(theta.data(), theta.size());
    Eigen::VectorXd out;
    try {
      model_->unconstrain_array(x, out, nullptr);
    } catch (...) {
      rethrow_evaluation_error();
    }
    return to_numpy(out);
  }

  stan::model::model_base &model() const { return *model_; }

  // Whether the next evaluation releases the GIL (the last one took KEEP_GIL_BELOW or more).
  bool releases_gil() const { return release_gil_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<stan::model::model_base> model_;
  mutable std::atomic<bool> release_gil_{true};
  std::size_t num_unc_ = 0;

  Eigen::VectorXd checked_point(const array_d &theta) const {
    if (theta.ndim() != 1 || static_cast<std::size_t>(theta.size()) != num_unc_)
      throw python_error(PyExc_ValueError, "unconstrained parameter vector has shape " +
                                               shape_text(theta) + ", expected (" +
                                               std::to_string(num_unc_) + ",)");
    Eigen::Map<const Eigen::VectorXd> x(theta.data(), num_unc_);
    for (std::size_t i = 0; i < num_unc_; ++i)
      if (std::isnan(x[i]))
        throw python_error(PyExc_ValueError, "unconstrained parameter vector has NaN at index " +
                                                 std::to_string(i));
    return x;
  }

  static std::string shape_text(const py::array &a) {
    std::string s = "(";
    for (py::ssize_t d = 0; d < a.ndim(); ++d) s += std::to_string(a.shape(d)) + (a.ndim() == 1 ? "," : d + 1 < a.ndim() ? ", " : "");
    return s + ")";
  }

  stan::math::var var_log_prob(vector_v &x, bool propto, bool jacobian, std::ostream *msgs) const {
    if (propto)
      return jacobian ? model_->log_prob_propto_jacobian(x, msgs) : model_->log_prob_propto(x, msgs);
    return jacobian ? model_->log_prob_jacobian(x, msgs) : model_->log_prob(x, msgs);
  }

  double gradient(const Eigen::VectorXd &x, bool propto, bool jacobian, double *grad,
                  std::ostream *msgs) const {
    ensure_autodiff_stack();
    try {
      vector_v xv = x.cast<stan::math::var>();
      stan::math::var lp = var_log_prob(xv, propto, jacobian, msgs);
      lp.grad();
      for (std::size_t i = 0; i < num_unc_; ++i) grad[i] = xv[i].adj();
      double value = lp.val();
      stan::math::recover_memory();
      return value;
    } catch (...) {
      stan::math::recover_memory();
      rethrow_evaluation_error();
    }
    return 0;
  }

  [[noreturn]] static void rethrow_evaluation_error() {
    try {
      throw;
    } catch (const std::domain_error &e) {
      throw python_error(domain_error_type, e.what());
    } catch (const std::exception &e) {
      throw python_error(evaluation_error_type, e.what());
    }
  }

  static py::array_t<double> to_numpy(const Eigen::VectorXd &v) {
    py::array_t<double> out(v.size());
    std::copy(v.data(), v.data() + v.size(), out.mutable_data());
    return out;
  }
};

// ---- NUTS through Stan's services, with in-memory writers ----

// Keeps every numeric row (draws) and the header; ignores text lines.
class table_writer : public stan::callbacks::writer {
 public:
  std::vector<std::string> names;
  std::vector<std::vector<double>> rows;
  void operator()(const std::vector<std::string> &n) override { names = n; }
  void operator()(const std::vector<double> &row) override { rows.push_back(row); }
};

// Receives the adapted step size and inverse metric.
class adaptation_writer : public stan::callbacks::structured_writer {
 public:
  double stepsize = std::nan("");
  Eigen::MatrixXd inv_metric;
  void write(const std::string &key, double value) override {
    if (key == "stepsize") stepsize = value;
  }
  void write(const std::string &key, const Eigen::VectorXd &v) override {
    if (key == "inv_metric") inv_metric = v;
  }
  void write(const std::string &key, const Eigen::MatrixXd &m) override {
    if (key == "inv_metric") inv_metric = m;
  }
};

// Keeps Stan's messages. With `forward_prints`, what the program printed goes to Python's print sink
// instead, as it comes: NUTS hands it over as an `info(stringstream)` holding whole lines (stanc ends
// each print with a newline), which no message of its own is (its timing and adaptation notes have no
// final newline, the others are plain strings). L-BFGS mixes prints with its rejection messages in one
// stream, so the optimisation and Pathfinder services keep them all as messages.
//
// It also notes when Stan's Hamiltonian rejected a proposal because the log density threw (a `reject`, a
// domain error): base_hamiltonian logs REJECTION_MESSAGE as an error, then sets the potential to infinity,
// which ends the transition as a divergence. `rejected_iteration` is the `iteration` (the interrupt's count,
// where given) that it last happened in, so that NUTS can count such transitions apart from divergences.
class message_logger : public stan::callbacks::logger {
 public:
  static constexpr const char *REJECTION_MESSAGE =
      "Informational Message: The current Metropolis proposal is about to be rejected";
  std::vector<std::string> messages;
  bool forward_prints = false;
  const std::atomic<long> *iteration = nullptr;
  long rejected_iteration = -1;
  void info(const std::string &m) override { keep(m); }
  void info(const std::stringstream &m) override {
    std::string text = m.str();
    if (forward_prints && !text.empty() && text.back() == '\n') {
      py::gil_scoped_acquire acquire;  // called from the service's thread, GIL released
      forward_print(text);
      return;
    }
    keep(text);
  }
  void warn(const std::string &m) override { keep(m); }
  void warn(const std::stringstream &m) override { keep(m.str()); }
  void error(const std::string &m) override {
    if (iteration != nullptr && m.rfind(REJECTION_MESSAGE, 0) == 0) rejected_iteration = iteration->load();
    keep(m);
  }
  void error(const std::stringstream &m) override { error(m.str()); }
  void fatal(const std::string &m) override { keep(m); }
  void fatal(const std::stringstream &m) override { keep(m.str()); }

 private:
  void keep(const std::string &m) {
    if (!m.empty()) messages.push_back(m);
  }
};

struct interrupted : std::exception {
  const char *what() const noexcept override { return "sampling interrupted"; }
};

// Counts iterations (read by Python for progress) and stops on request.
class progress_interrupt : public stan::callbacks::interrupt {
 public:
  std::atomic<long> iterations{0};
  std::atomic<bool> stop{false};
  void operator()() override {
    if (stop.load()) throw interrupted();
    ++iterations;
  }
};

py::array_t<double> matrix_to_numpy(const Eigen::MatrixXd &m) {
  py::array_t<double> out({m.rows(), m.cols()});
  Eigen::Map<Eigen::Matrix<double, -1, -1, Eigen::RowMajor>>(out.mutable_data(), m.rows(), m.cols()) = m;
  return out;
}

// What the service objects (NutsChain, PathfinderPath, Optimization) share:
// the model and settings they were made with, progress and stop for Python,
// and the run's record (the logger's messages, an error, whether it was
// stopped, its seconds). Each runs its service in `guard`, with the GIL
// released, and adds `report` to its result.
class service_run {
 public:
  service_run(const Model &model, py::dict settings) : model_(model), settings_(std::move(settings)) {}

  long iterations() const { return interrupt_.iterations.load(); }
  void request_stop() { interrupt_.stop.store(true); }

 protected:
  const Model &model_;
  py::dict settings_;
  progress_interrupt interrupt_;
  message_logger logger_;

  // One setting, as the C++ type the service takes.
  template <typename T>
  T setting(const char *key) const {
    return settings_[key].cast<T>();
  }

  // Run `body` (GIL released by the caller), turning exceptions, stops and error codes into fields.
  template <typename F>
  void guard(F &&body) {
    ensure_autodiff_stack();
    auto start = std::chrono::steady_clock::now();
    int code = 0;
    try {
      code = body();
    } catch (const interrupted &) {
      stopped_ = true;
    } catch (const std::exception &e) {
      error_ = e.what();
    }
    // The services catch our interrupt exception and return an error code.
    if (interrupt_.stop.load()) {
      stopped_ = true;
      error_.clear();
      code = 0;
    }
    // The services log a configuration error (failed initialisation, bad metric) and return its code.
    if (code != 0 && error_.empty())
      error_ = logger_.messages.empty() ? "Stan's service returned error code " + std::to_string(code)
                                        : logger_.messages.back();
    stan::math::recover_memory();
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    seconds_ = elapsed.count();
  }

  void report(py::dict &out) const {
    out["messages"] = logger_.messages;
    out["interrupted"] = stopped_;
    out["error"] = error_;
    out["seconds"] = seconds_;
  }

 private:
  bool stopped_ = false;
  std::string error_;
  double seconds_ = 0;
};

// The L-BFGS settings that Stan's optimize and Pathfinder services both take.
struct lbfgs_settings {
  std::string init_json;
  unsigned int seed;
  double init_radius;
  int history_size;
  double init_alpha, tol_obj, tol_rel_obj, tol_grad, tol_rel_grad, tol_param;
  int num_iterations;

  explicit lbfgs_settings(const py::dict &s)
      : init_json(s["init"].cast<std::string>()),
        seed(s["seed"].cast<unsigned int>()),
        init_radius(s["init_radius"].cast<double>()),
        history_size(s["history_size"].cast<int>()),
        init_alpha(s["init_alpha"].cast<double>()),
        tol_obj(s["tol_obj"].cast<double>()),
        tol_rel_obj(s["tol_rel_obj"].cast<double>()),
        tol_grad(s["tol_grad"].cast<double>()),
        tol_rel_grad(s["tol_rel_grad"].cast<double>()),
        tol_param(s["tol_param"].cast<double>()),
        num_iterations(s["num_iterations"].cast<int>()) {}
};

// NUTS's draws, and with each whether a proposal of its transition was rejected by the program: the logger
// noted a rejection in the iteration (the interrupt's count) that the row ends.
class nuts_sample_writer : public table_writer {
 public:
  nuts_sample_writer(const message_logger &logger, const progress_interrupt &interrupt)
      : logger_(logger), interrupt_(interrupt) {}
  std::vector<char> rejected;  // one per row
  using table_writer::operator();
  void operator()(const std::vector<double> &row) override {
    table_writer::operator()(row);
    rejected.push_back(logger_.rejected_iteration == interrupt_.iterations.load());
  }

 private:
  const message_logger &logger_;
  const progress_interrupt &interrupt_;
};

// One NUTS chain: configure, run (GIL released), then read results.
class NutsChain : public service_run {
 public:
  NutsChain(const Model &model, py::dict settings) : service_run(model, std::move(settings)) {
    logger_.forward_prints = true;
    logger_.iteration = &interrupt_.iterations;
  }

  void run() {
    const std::string metric = setting<std::string>("metric");
    const bool adapt = setting<bool>("adapt");
    const unsigned int seed = setting<unsigned int>("seed");
    const unsigned int chain = setting<unsigned int>("chain");
    const double init_radius = setting<double>("init_radius");
    const int num_warmup = setting<int>("num_warmup");
    const int num_samples = setting<int>("num_samples");
    const int num_thin = setting<int>("num_thin");
    const double stepsize = setting<double>("stepsize");
    const double stepsize_jitter = setting<double>("stepsize_jitter");
    const int max_depth = setting<int>("max_depth");
    const double delta = setting<double>("delta");
    const double gamma = setting<double>("gamma");
    const double kappa = setting<double>("kappa");
    const double t0 = setting<double>("t0");
    const unsigned int init_buffer = setting<unsigned int>("init_buffer");
    const unsigned int term_buffer = setting<unsigned int>("term_buffer");
    const unsigned int window = setting<unsigned int>("window");

    std::istringstream init_in(setting<std::string>("init")), metric_in(setting<std::string>("inv_metric"));
    py::gil_scoped_release release;
    guard([&] {
      stan::json::json_data init(init_in);
      stan::json::json_data inv_metric(metric_in);
      stan::model::model_base &m = model_.model();
      const bool dense = metric == "dense";
      if (adapt && dense)
        return stan::services::sample::hmc_nuts_dense_e_adapt(
            m, init, inv_metric, seed, chain, init_radius, num_warmup, num_samples, num_thin, true, 0, stepsize,
            stepsize_jitter, max_depth, delta, gamma, kappa, t0, init_buffer, term_buffer, window, interrupt_,
            logger_, init_writer_, sample_writer_, diagnostic_writer_, adaptation_);
      if (adapt)
        return stan::services::sample::hmc_nuts_diag_e_adapt(
            m, init, inv_metric, seed, chain, init_radius, num_warmup, num_samples, num_thin, true, 0, stepsize,
            stepsize_jitter, max_depth, delta, gamma, kappa, t0, init_buffer, term_buffer, window, interrupt_,
            logger_, init_writer_, sample_writer_, diagnostic_writer_, adaptation_);
      if (dense)
        return stan::services::sample::hmc_nuts_dense_e(m, init, inv_metric, seed, chain, init_radius, num_warmup,
                                                        num_samples, num_thin, true, 0, stepsize, stepsize_jitter,
                                                        max_depth, interrupt_, logger_, init_writer_,
                                                        sample_writer_, diagnostic_writer_);
      return stan::services::sample::hmc_nuts_diag_e(m, init, inv_metric, seed, chain, init_radius, num_warmup,
                                                     num_samples, num_thin, true, 0, stepsize, stepsize_jitter,
                                                     max_depth, interrupt_, logger_, init_writer_, sample_writer_,
                                                     diagnostic_writer_);
    });
  }

  py::dict result() const {
    py::dict out;
    out["sample_names"] = sample_writer_.names;
    out["sample_rows"] = rows_to_numpy(sample_writer_.rows, sample_writer_.names.size());
    out["rejected"] = rejected_to_numpy(sample_writer_, sample_writer_.names.size());
    out["diagnostic_names"] = diagnostic_writer_.names;
    out["diagnostic_rows"] = rows_to_numpy(diagnostic_writer_.rows, diagnostic_writer_.names.size());
    out["stepsize"] = adaptation_.stepsize;
    out["inv_metric"] = matrix_to_numpy(adaptation_.inv_metric);
    report(out);
    return out;
  }

 private:
  stan::callbacks::writer init_writer_;
  nuts_sample_writer sample_writer_{logger_, interrupt_};
  table_writer diagnostic_writer_;
  adaptation_writer adaptation_;

  // Whether each row that rows_to_numpy keeps had a proposal rejected by the program.
  static py::array_t<bool> rejected_to_numpy(const nuts_sample_writer &writer, std::size_t width) {
    std::vector<bool> kept;
    for (std::size_t i = 0; i < writer.rows.size(); ++i)
      if (writer.rows[i].size() == width) kept.push_back(writer.rejected[i] != 0);
    py::array_t<bool> out(kept.size());
    std::copy(kept.begin(), kept.end(), out.mutable_data());
    return out;
  }

  static py::array_t<double> rows_to_numpy(const std::vector<std::vector<double>> &rows, std::size_t width) {
    std::size_t n = 0;
    for (const auto &r : rows)
      if (r.size() == width) ++n;
    py::array_t<double> out({n, width});
    double *p = out.mutable_data();
    for (const auto &r : rows)
      if (r.size() == width) p = std::copy(r.begin(), r.end(), p);
    return out;
  }
};

// One path of Stan's Pathfinder (`pathfinder_lbfgs_single`), returning its
// draws and their log density ratios. Python runs the paths in parallel
// threads and does the multi-path PSIS resampling, which gives Pareto k (the
// multi-path service only logs k above 0.7, and runs its paths on TBB
// workers, which have no autodiff tape here).
class PathfinderPath : public service_run {
 public:
  using service_run::service_run;

  void run() {
    const lbfgs_settings l(settings_);
    const unsigned int path = setting<unsigned int>("path");
    const int num_elbo_draws = setting<int>("num_elbo_draws");
    const int num_draws = setting<int>("num_draws");
    std::istringstream init_in(l.init_json);
    py::gil_scoped_release release;
    guard([&] {
      stan::json::json_data init(init_in);
      stan::callbacks::writer init_writer, parameter_writer;
      stan::callbacks::structured_writer diagnostic_writer;
      auto out = stan::services::pathfinder::pathfinder_lbfgs_single<true>(
          model_.model(), init, l.seed, path, l.init_radius, l.history_size, l.init_alpha, l.tol_obj,
          l.tol_rel_obj, l.tol_grad, l.tol_rel_grad, l.tol_param, l.num_iterations, num_elbo_draws, num_draws,
          false, 0, interrupt_, logger_, init_writer, parameter_writer, diagnostic_writer, true);
      lp_ratio_ = std::get<1>(out).matrix();
      draws_ = std::get<2>(out).transpose();
      evaluations_ = std::get<3>(out);
      return std::get<0>(out);
    });
  }

  py::dict result() const {
    py::dict out;
    std::vector<std::string> names{"lp_approx__", "lp__"};
    model_.model().constrained_param_names(names, true, true);
    out["names"] = names;
    out["draws"] = matrix_to_numpy(draws_);
    out["lp_ratio"] = matrix_to_numpy(lp_ratio_);
    out["evaluations"] = evaluations_;
    report(out);
    return out;
  }

 private:
  Eigen::MatrixXd draws_, lp_ratio_;
  std::size_t evaluations_ = 0;
};

// Stan's L-BFGS optimisation (the `optimize` service), with or without the
// Jacobian, then the Hessian at the mode by finite differences of gradients
// (`finite_diff_hessian_auto`, as Stan's `laplace_sample` service computes it).
class Optimization : public service_run {
 public:
  using service_run::service_run;

  void run() {
    const lbfgs_settings l(settings_);
    const bool jacobian = setting<bool>("jacobian");
    const unsigned int chain = setting<unsigned int>("chain");
    std::istringstream init_in(l.init_json);
    py::gil_scoped_release release;
    guard([&] {
      stan::json::json_data init(init_in);
      stan::callbacks::writer init_writer;
      stan::model::model_base &m = model_.model();
      int code = jacobian ? stan::services::optimize::lbfgs<stan::model::model_base, true>(
                                m, init, l.seed, chain, l.init_radius, l.history_size, l.init_alpha, l.tol_obj,
                                l.tol_rel_obj, l.tol_grad, l.tol_rel_grad, l.tol_param, l.num_iterations, false,
                                0, interrupt_, logger_, init_writer, writer_)
                          : stan::services::optimize::lbfgs<stan::model::model_base, false>(
                                m, init, l.seed, chain, l.init_radius, l.history_size, l.init_alpha, l.tol_obj,
                                l.tol_rel_obj, l.tol_grad, l.tol_rel_grad, l.tol_param, l.num_iterations, false,
                                0, interrupt_, logger_, init_writer, writer_);
      if (code != 0 || writer_.rows.empty()) return code;
      const std::vector<double> &row = writer_.rows.back();
      std::vector<std::string> names;
      m.constrained_param_names(names, false, false);
      Eigen::VectorXd constrained = Eigen::Map<const Eigen::VectorXd>(row.data() + 1, names.size());
      m.unconstrain_array(constrained, mode_, nullptr);
      std::stringstream msgs;
      auto log_density = [&](const Eigen::Matrix<stan::math::var, -1, 1> &theta) {
        auto &t = const_cast<Eigen::Matrix<stan::math::var, -1, 1> &>(theta);
        return jacobian ? m.template log_prob<true, true, stan::math::var>(t, &msgs)
                        : m.template log_prob<true, false, stan::math::var>(t, &msgs);
      };
      stan::math::internal::finite_diff_hessian_auto(log_density, mode_, log_density_, gradient_, hessian_);
      return code;
    });
  }

  py::dict result() const {
    py::dict out;
    out["names"] = writer_.names;
    out["rows"] = writer_.rows;
    out["mode"] = matrix_to_numpy(mode_);
    out["log_density"] = log_density_;
    out["gradient"] = matrix_to_numpy(gradient_);
    out["hessian"] = matrix_to_numpy(hessian_);
    out["iterations"] = iterations();
    report(out);
    return out;
  }

 private:
  table_writer writer_;
  Eigen::VectorXd mode_, gradient_;
  Eigen::MatrixXd hessian_;
  double log_density_ = std::nan("");
};

// A service class's Python face: made from a model and settings, run (with
// the GIL released), its iterations so far, stop, and its result.
template <typename Service>
void define_service(py::module_ &m, const char *name) {
  py::class_<Service>(m, name, py::module_local())
      .def(py::init<const Model &, py::dict>(), py::arg("model"), py::arg("settings"), py::keep_alive<1, 2>())
      .def("run", &Service::run)
      .def("iterations", &Service::iterations)
      .def("request_stop", &Service::request_stop)
      .def("result", &Service::result);
}

}  // namespace

// Each built program gets a module of its own name (see compiler.py): a
// two-line init function, compiled per program, calls this. Distinct names
// keep CPython from handing back an already loaded module of the same name.
void define_module(py::module_ &m) {
  py::module_ errors = py::module_::import("stanaccel.stan.errors");
  domain_error_type = errors.attr("StanDomainError").ptr();
  evaluation_error_type = errors.attr("StanEvaluationError").ptr();
  data_error_type = errors.attr("StanDataError").ptr();
  print_sink = py::object(py::module_::import("stanaccel.stan.prints").attr("forward")).release().ptr();
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const python_error &e) {
      PyErr_SetString(e.type, e.message.c_str());
    }
  });

  py::class_<Model>(m, "Model", py::module_local())
      .def(py::init<const std::string &, unsigned int>(), py::arg("data_json"), py::arg("seed"))
      .def("name", &Model::name)
      .def("param_num", &Model::param_num, py::arg("include_tp"), py::arg("include_gq"))
      .def("param_unc_num", &Model::param_unc_num)
      .def("releases_gil", &Model::releases_gil)
      .def("param_names", &Model::param_names, py::arg("include_tp"), py::arg("include_gq"))
      .def("param_unc_names", &Model::param_unc_names)
      .def("variables", &Model::variables, py::arg("include_tp"), py::arg("include_gq"))
      .def("log_density", &Model::log_density, py::arg("theta_unc"), py::arg("propto"), py::arg("jacobian"))
      .def("log_density_gradient", &Model::log_density_gradient, py::arg("theta_unc"), py::arg("propto"),
           py::arg("jacobian"), py::arg("grad_out"))
      .def("time_log_density_gradient", &Model::time_log_density_gradient, py::arg("theta_unc"),
           py::arg("repeats"))
      .def("param_constrain", &Model::param_constrain, py::arg("theta_unc"), py::arg("include_tp"),
           py::arg("include_gq"), py::arg("seed"))
      .def("param_unconstrain", &Model::param_unconstrain, py::arg("theta"));

  define_service<NutsChain>(m, "NutsChain");
  define_service<PathfinderPath>(m, "PathfinderPath");
  define_service<Optimization>(m, "Optimization");
}

extern "C" PyObject *stanaccel_create_module(const char *name) {
  py::detail::get_internals();
  auto *definition = new PyModuleDef();  // lives as long as the process, like the module
  try {
    auto m = py::module_::create_extension_module(name, "One compiled Stan program, bridged by stanaccel.",
                                                  definition);
    define_module(m);
    return m.release().ptr();
  } catch (py::error_already_set &e) {
    e.restore();
  } catch (const std::exception &e) {
    PyErr_SetString(PyExc_ImportError, e.what());
  }
  return nullptr;
}
