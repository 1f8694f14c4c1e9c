"""What a wrong graph walk does, said once for both engines (notebook 2's Value, notebook 4's Tensor).

Each text names the misconception and what to do instead; the checks add the probe and its numbers.
"""

EARLY_NODE = ("a node was processed before all of its consumers had contributed: its rule ran with part of its "
              "gradient, and what arrived later never reached its inputs. A walk from the end that runs each node "
              "when it is first reached does this; walk reversed(topological order), which puts every consumer "
              "before the nodes it uses.")

EVERY_PATH = ("a walk that follows every path runs a shared node once per path, counting its gradient again each "
              "time. Run each node once, in reverse topological order.")

SHARED_IS_NOT_A_CYCLE = ("a node used by several others is reached once along each path, and meeting it again is "
                         "normal: skip it if it is already finished. Only a node that is still in progress (expanded, "
                         "its inputs not all appended yet) closes a cycle; keep that set apart from the visited one.")
