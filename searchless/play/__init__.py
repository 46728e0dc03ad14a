"""Playing: a trained model as a policy, the Player API, agents, and the UCI engine."""
