"""The Reflexion cycle: the runner (compose, act, evaluate, reflect, remember), when to stop
(policy), the Ω window, the actor's prompt, assembling a loop from settings, and many loops at
once (batch).
"""
