/** Chat templates the tests render. */

/** ChatML, as Qwen's templates write it (without their tool and thinking branches). */
export const CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
