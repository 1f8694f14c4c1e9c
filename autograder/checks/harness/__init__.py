"""What the checks are built from: calling learner code safely and saying what went wrong (``diagnostics``), the two
references (``oracles``), random programs for both engines (``random_programs``), graphs the check records itself
(``recorded``), the judge of a graph walk (``graph_walks``) and notebook 3's judge of one backward function, a
vector–Jacobian product against torch and central differences (``vjp``). Runs in the trusted process only."""
