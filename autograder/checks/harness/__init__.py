"""What the checks are built from: calling learner code safely and saying what went wrong (``diagnostics``), the two
references (``oracles``), random programs for both engines (``random_programs``), graphs the check records itself
(``recorded``) and the judge of a graph walk (``graph_walks``). Runs in the trusted process only."""
