// Cheap surrogates of the elliptic PDE posterior, in the same whitened coordinates xi.
//
// The exact posterior (stanaccel.pde) is xi ~ N(0, I), u = mean + L xi at the
// nodes of a fine mesh, p solving -div(exp(u) grad p) = f with no-flux
// boundaries and zero boundary mean, y ~ N(p at the sensors, sd^2 I). Here the
// forward map xi -> p at the sensors is replaced by a cheap one, chosen by `linear`:
//
//   linear = 0: the same PDE on a coarse mesh of P1 elements, solved densely.
//     u at the coarse nodes is the fine field there (field_offset + field_map xi),
//     kappa = exp(u_h) at the quadrature points, K's values a sparse linear map
//     of kappa, K less the row and column of one pinned boundary node solved
//     against the compatible load, p shifted to zero boundary mean: the
//     "pinned" formulation of stanaccel.pde.EllipticSolver, step by step.
//   linear = 1: the forward map linearised at the MAP,
//     obs = at_map + map_jacobian (xi - xi_map).
//
// The noise is N(error_mean, error_chol error_chol'): sd I for the plain
// surrogate, or the approximation error model (Kaipio and Somersalo) that
// adds the mean and covariance of (exact - surrogate) observations.
// The other branch's data have size 0. Sparse matrices are CSR, 1-based
// (Stan's csr_* functions). Data builder: stanaccel.pde.surrogates.
data {
  int<lower=1> D;                              // dimension of xi
  int<lower=1> n_obs;                          // sensors
  vector[n_obs] y;                             // observations
  vector[n_obs] error_mean;                    // mean of the observation error
  cholesky_factor_cov[n_obs] error_chol;       // Cholesky factor of its covariance
  int<lower=0, upper=1> linear;                // 0: coarse PDE, 1: linearised forward map

  // ---- linear = 0: the coarse PDE (all sizes 0 otherwise) ----
  int<lower=0> n_nodes;                        // coarse nodes (u and p live there)
  int<lower=0> n_free;                         // n_nodes - 1: all nodes but the pinned one
  int<lower=0> n_points;                       // quadrature points of the coarse mesh
  vector[n_nodes] field_offset;                // u at the nodes = field_offset + field_map xi
  matrix[n_nodes, D] field_map;
  // u_h at the quadrature points = interp u, (n_points x n_nodes)
  int<lower=0> interp_nnz;
  vector[interp_nnz] interp_w;
  array[interp_nnz] int<lower=1> interp_v;
  array[n_points + 1] int<lower=1> interp_u;
  // the pinned K's stored values = values kappa, (n_entries x n_points)
  int<lower=0> n_entries;
  int<lower=0> values_nnz;
  vector[values_nnz] values_w;
  array[values_nnz] int<lower=1> values_v;
  array[n_entries + 1] int<lower=1> values_u;
  // where those values sit: the pinned K's CSR pattern, (n_free x n_free)
  array[n_entries] int<lower=1> pattern_v;
  array[n_free + 1] int<lower=1> pattern_u;
  array[n_free] int<lower=1, upper=n_nodes> free;  // the node of each unknown
  vector[n_free] load;                         // the compatible load at the free nodes
  vector[n_nodes] boundary;                    // boundary' p is p's boundary mean
  matrix[n_obs, n_nodes] observe;              // p at the sensors = observe p

  // ---- linear = 1: the linearised forward map (sizes 0 otherwise) ----
  vector[linear ? D : 0] xi_map;               // where the map is linearised
  vector[linear ? n_obs : 0] at_map;           // observations at xi_map
  matrix[linear ? n_obs : 0, D] map_jacobian;  // d obs / d xi at xi_map
}
transformed data {
  if (!linear && (n_nodes < 2 || n_free != n_nodes - 1 || n_points < 1 || n_entries < 1)) {
    reject("the coarse surrogate (linear = 0) needs its mesh: n_nodes = ", n_nodes,
           ", n_free = ", n_free, ", n_points = ", n_points, ", n_entries = ", n_entries);
  }
}
parameters {
  vector[D] xi;
}
model {
  vector[n_obs] obs;
  if (linear) {
    obs = at_map + map_jacobian * (xi - xi_map);
  } else {
    vector[n_nodes] u = field_offset + field_map * xi;
    vector[n_points] kappa = exp(csr_matrix_times_vector(n_points, n_nodes, interp_w, interp_v,
                                                         interp_u, u));
    vector[n_entries] k_values = csr_matrix_times_vector(n_entries, n_points, values_w, values_v,
                                                         values_u, kappa);
    matrix[n_free, n_free] K = csr_to_dense_matrix(n_free, n_free, k_values, pattern_v, pattern_u);
    vector[n_nodes] p = rep_vector(0, n_nodes);  // p = 0 at the pinned node
    p[free] = mdivide_left_spd(K, load);
    p -= dot_product(boundary, p);               // zero boundary mean
    obs = observe * p;
  }
  xi ~ std_normal();
  y ~ multi_normal_cholesky(obs + error_mean, error_chol);
}
