// ACES-O: maximise J(softmax(logits)) with Adam, entirely in C++ (docs/contract.rst §3).
//
// Only the active columns enter the surrogate (inactive columns have weight 0,
// so they change neither the scores nor J). The optimiser (softmax, Adam) lives
// in adam.hpp, shared with the binned fit; this file supplies the exact
// surrogate workspace (no allocation per step).
#include "kernels/adam.hpp"
#include "kernels/kernels.hpp"

namespace aces_fast {

void aces_o_fit(const uint8_t* B, int64_t n, int64_t m, const double* logits0,
                const uint8_t* active, double gamma, double lr, int64_t steps,
                const int64_t* counts, double* weights_out, double* objective_out, bool parallel,
                int n_threads) {
  if (steps < 0) steps = 0;
  const std::vector<int64_t> act = adam::begin_fit(m, active, steps, weights_out, objective_out);
  if (act.empty()) return;
  SurrogateWorkspace ws(B, n, m, counts, act.data(), static_cast<int64_t>(act.size()), parallel,
                        n_threads);
  adam::fit(ws, act, logits0, gamma, lr, steps, weights_out, objective_out);
}

}  // namespace aces_fast
