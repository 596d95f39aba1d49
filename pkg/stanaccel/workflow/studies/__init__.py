"""The studies: workflow actions that set samplers side by side on one problem and write their tables.

- :mod:`~stanaccel.workflow.studies.tempering` (``tempering_study``): tempering
  samplers against Stan NUTS over data sizes;
- :mod:`~stanaccel.workflow.studies.approximation` (``approximation_study``):
  exact samplers that move with fast approximations, on GP regression;
- :mod:`~stanaccel.workflow.studies.latent` (``latent_study``): autoencoder
  latent-space samplers on logistic regression;
- :mod:`~stanaccel.workflow.studies.pde` (``pde_study``): the elliptic PDE inverse problem;
- :mod:`~stanaccel.workflow.studies.ising` (``ising_study``): Bayesian-optimised
  intracluster moves on constrained Ising models;
- :mod:`~stanaccel.workflow.studies.density` (``density_study``): the GP density model.

:mod:`~stanaccel.workflow.studies.baseline` holds what the Stan-program
studies share: the NUTS baseline, reference and pilot runs, and the step size
and metric a NUTS run hands the samplers. :data:`stanaccel.workflow.actions.ACTIONS`
names each study's function and schema.
"""
