/**
 * The run form's fields: every field of the run spec, with the library's defaults.
 *
 * Config fields and defaults are those of `nnx_ppo/algorithms/config.py` (TrainConfig,
 * DistillationTrainConfig and their parts); network fields are the keyword arguments of
 * `make_mlp_actor_critic` / `make_lstm_actor_critic` (`nnx_ppo/networks/factories.py`).
 */

export type FieldKind =
  | "int"
  | "float"
  | "optionalFloat"
  /** An integer, or none (`null`) when left empty. */
  | "optionalInt"
  | "bool"
  /** A list of positive integers, typed as `64, 64`. */
  | "sizes"
  /** A list of numbers or none (`null`), typed as `0, 50, 100` or left empty. */
  | "optionalNumberList"
  | "choice"
  /** LoggingLevel flags; sent as a list of flag names. */
  | "flags"
  /** A JSON object. */
  | "json"
  /** A string, or none (`null`) when left empty. */
  | "optionalText";

export interface FieldDef {
  name: string;
  kind: FieldKind;
  default: unknown;
  help: string;
  choices?: readonly string[];
}

export interface Section {
  /** Where the section's fields live in the spec, e.g. ["config", "ppo"]. */
  path: readonly string[];
  title: string;
  fields: readonly FieldDef[];
}

export const ACTIVATIONS = ["swish", "relu", "tanh", "elu", "gelu"] as const;

/** The networks' matrix-product precisions (`nnx_ppo/networks/precision.py`), default first. */
export const PRECISIONS = ["float32", "bfloat16"] as const;

export const LOGGING_FLAGS = [
  "LOSSES",
  "CRITIC_EXTRA",
  "ACTOR_EXTRA",
  "ROLLOUT_STATS",
  "ROLLOUT_OBS",
  "ENV_METRICS",
  "NETWORK_METRICS",
  "GRAD_NORM",
  "WEIGHTS",
  "THROUGHPUT",
] as const;

const networkCommon = (actor: number[], critic: number[]): FieldDef[] => [
  {
    name: "actor_hidden_sizes",
    kind: "sizes",
    default: actor,
    help: "Hidden layer widths of the policy network.",
  },
  {
    name: "critic_hidden_sizes",
    kind: "sizes",
    default: critic,
    help: "Hidden layer widths of the value network.",
  },
  {
    name: "normalize_obs",
    kind: "bool",
    default: true,
    help: "Standardize observations with running statistics.",
  },
  { name: "activation", kind: "choice", default: "swish", choices: ACTIVATIONS, help: "Hidden activation." },
  {
    name: "precision",
    kind: "choice",
    default: "float32",
    choices: PRECISIONS,
    help:
      "Arithmetic of the matrix products. bfloat16 accumulates in float32 and keeps parameters, " +
      "activations and losses float32; ~1.4x faster iterations on a CPU.",
  },
  { name: "entropy_weight", kind: "float", default: 0.01, help: "Weight of the policy's entropy bonus." },
  { name: "min_std", kind: "float", default: 0.001, help: "Floor of the policy's standard deviation." },
];

/** Asymmetric actor-critic (mlp): the dict-observation keys each side reads. */
const obsKeys: FieldDef[] = [
  {
    name: "policy_obs_key",
    kind: "optionalText",
    default: null,
    help: "Dict observations: the key the policy reads (e.g. state); empty: every key. Set with value_obs_key.",
  },
  {
    name: "value_obs_key",
    kind: "optionalText",
    default: null,
    help: "Dict observations: the key the value reads (e.g. privileged_state); the policy never sees it.",
  },
];

export const NETWORK_FIELDS: Record<"mlp" | "lstm", readonly FieldDef[]> = {
  mlp: [...networkCommon([64, 64], [256, 256]), ...obsKeys],
  lstm: [
    {
      name: "lstm_size",
      kind: "int",
      default: 64,
      help: "Units of each LSTM (policy and value have one each).",
    },
    ...networkCommon([64], [64]),
  ],
};

const optimization = (): FieldDef[] => [
  {
    name: "n_envs",
    kind: "int",
    default: 256,
    help: "Parallel environments (the batch axis of every rollout).",
  },
  { name: "rollout_length", kind: "int", default: 20, help: "Environment steps per env in each iteration." },
  {
    name: "total_steps",
    kind: "int",
    default: 512000,
    help: "Training stops once this many env steps (summed over envs) were taken.",
  },
];

const optimizerTail = (): FieldDef[] => [
  {
    name: "gradient_clipping",
    kind: "optionalFloat",
    default: null,
    help: "Global gradient-norm clip; empty for none.",
  },
  {
    name: "weight_decay",
    kind: "optionalFloat",
    default: null,
    help: "Decoupled weight decay (AdamW); empty for plain Adam.",
  },
  {
    name: "logging_level",
    kind: "flags",
    default: ["LOSSES"],
    help: "Which metric groups each step reports.",
  },
  {
    name: "logging_percentiles",
    kind: "optionalNumberList",
    default: null,
    help: "Percentiles for distribution metrics; empty reports mean and std.",
  },
];

export const PPO_SECTION: Section = {
  path: ["config", "ppo"],
  title: "PPO",
  fields: [
    ...optimization(),
    {
      name: "gae_lambda",
      kind: "float",
      default: 0.95,
      help: "GAE lambda in [0, 1]: 0 is one-step TD, 1 is Monte-Carlo.",
    },
    { name: "discounting_factor", kind: "float", default: 0.99, help: "Discount gamma in (0, 1]." },
    { name: "clip_range", kind: "float", default: 0.2, help: "PPO ratio clipping epsilon, in (0, 1)." },
    { name: "learning_rate", kind: "float", default: 0.0001, help: "Adam learning rate." },
    {
      name: "normalize_advantages",
      kind: "bool",
      default: true,
      help: "Standardize advantages per minibatch.",
    },
    {
      name: "combine_advantages",
      kind: "bool",
      default: false,
      help: "With several reward streams: sum their advantages before normalizing.",
    },
    { name: "n_epochs", kind: "int", default: 4, help: "Passes over each rollout." },
    {
      name: "n_minibatches",
      kind: "int",
      default: 4,
      help: "Minibatches per pass; they split the env axis, so n_envs must be divisible by it.",
    },
    {
      name: "critic_loss_weight",
      kind: "float",
      default: 1.0,
      help: "Weight of the value loss relative to the policy loss.",
    },
    ...optimizerTail(),
    {
      name: "anneal_learning_rate",
      kind: "bool",
      default: false,
      help: "Decay the learning rate linearly to zero at total_steps.",
    },
    {
      name: "reward_scaling",
      kind: "float",
      default: 1.0,
      help: "Rewards are multiplied by this before GAE (Brax's reward_scaling).",
    },
    {
      name: "minibatch_segment_length",
      kind: "optionalInt",
      default: null,
      help:
        "Empty: minibatches hold whole envs. A divisor of rollout_length: minibatches shuffle " +
        "segments of this many steps and GAE restarts at each, as Brax's unroll_length " +
        "(stateless networks only).",
    },
    {
      name: "env_step_chunk",
      kind: "optionalInt",
      default: null,
      help:
        "Empty: all envs step as one batch. A divisor of n_envs: envs step this many at a time " +
        "(faster physics for contact-rich envs on a CPU; last-bit differences; one device).",
    },
  ],
};

export const DISTILLATION_SECTION: Section = {
  path: ["config", "distillation"],
  title: "Distillation",
  fields: [
    ...optimization(),
    { name: "learning_rate", kind: "float", default: 0.0001, help: "Adam learning rate." },
    { name: "n_epochs", kind: "int", default: 4, help: "Passes over each rollout." },
    { name: "n_minibatches", kind: "int", default: 4, help: "Minibatches per pass (split the env axis)." },
    ...optimizerTail(),
  ],
};

export const EVAL_SECTION: Section = {
  path: ["config", "eval"],
  title: "Evaluation",
  fields: [
    { name: "enabled", kind: "bool", default: true, help: "Run evaluations during training." },
    {
      name: "every_steps",
      kind: "int",
      default: 50000,
      help: "Evaluate each time training passes a multiple of this many env steps.",
    },
    { name: "n_envs", kind: "int", default: 64, help: "Episodes per evaluation (one per env)." },
    {
      name: "max_episode_length",
      kind: "int",
      default: 1000,
      help: "Steps an evaluation episode runs at most.",
    },
    {
      name: "logging_level",
      kind: "flags",
      default: [],
      help: "Extra metric groups to report from evaluation.",
    },
    {
      name: "logging_percentiles",
      kind: "optionalNumberList",
      default: [0, 25, 50, 75, 100],
      help: "Percentiles of the episode reward; empty reports mean and std.",
    },
  ],
};

export const VIDEO_SECTION: Section = {
  path: ["config", "video"],
  title: "Video",
  fields: [
    {
      name: "enabled",
      kind: "bool",
      default: false,
      help: "Render an evaluation episode on the video schedule.",
    },
    {
      name: "every_steps",
      kind: "int",
      default: 200000,
      help: "Record each time training passes a multiple of this many env steps.",
    },
    { name: "episode_length", kind: "int", default: 1000, help: "Steps of the rendered episode." },
    {
      name: "render_kwargs",
      kind: "json",
      default: {},
      help: "Keyword arguments of the env's render (height, width, camera).",
    },
  ],
};

export const TRAINING_SECTION: Section = {
  path: ["config"],
  title: "Training",
  fields: [
    { name: "seed", kind: "int", default: 17, help: "Seed for environments, shuffling and initialization." },
    {
      name: "checkpoint_every_steps",
      kind: "int",
      default: 500000,
      help: "Checkpoint each time training passes a multiple of this many env steps.",
    },
  ],
};

export function networkSection(kind: "mlp" | "lstm"): Section {
  return { path: ["network"], title: "Network", fields: NETWORK_FIELDS[kind] };
}

export function configSections(kind: "ppo" | "distillation"): Section[] {
  return [kind === "ppo" ? PPO_SECTION : DISTILLATION_SECTION, EVAL_SECTION, VIDEO_SECTION, TRAINING_SECTION];
}
